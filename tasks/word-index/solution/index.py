"""Oracle agent for word-index: document frequency of every word."""

import gzip
import json
from pathlib import Path

text = gzip.decompress(Path("corpus.txt.gz").read_bytes()).decode()
docs = [d for d in text.split("\n\n") if d.strip()]
del text
df: dict[str, int] = {}
for i in range(len(docs)):
    words = docs[i].split()  # one list of every token of the document: spikes on a huge document
    docs[i] = ""
    for w in set(words):
        df[w] = df.get(w, 0) + 1
    del words
Path("index.json").write_text(json.dumps({"documents": len(docs), "df": dict(sorted(df.items()))}))
print(f"indexed {len(docs)} documents, {len(df)} distinct words")
