module headroom.local/pause

go 1.22
