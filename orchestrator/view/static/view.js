// Draws the interactive plots of a page from the figure specs the server embedded as JSON. A plot inside a
// folded section is drawn when the section is first opened (Plotly cannot size a hidden element).
function drawPlot(spec) {
  var target = document.getElementById(spec.id.replace(/-spec$/, ""));
  if (!target || typeof Plotly === "undefined" || target.getAttribute("data-drawn")) return;
  target.setAttribute("data-drawn", "1");
  var fig = JSON.parse(spec.textContent);
  Plotly.newPlot(target, fig.data, fig.layout, {displaylogo: false, responsive: true}).then(function () {
    target.setAttribute("data-ready", "1");
  });
}

// A link to a section (or to something inside one) opens the folded sections around its target.
function openTarget(id) {
  var el = id && document.getElementById(id);
  for (var d = el; d; d = d.parentElement) {
    if (d.tagName === "DETAILS") d.open = true;
  }
}

document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("script[type='application/json'][id$='-spec']").forEach(function (spec) {
    var folded = spec.closest("details");
    if (!folded || folded.open) { drawPlot(spec); return; }
    folded.addEventListener("toggle", function () { if (folded.open) drawPlot(spec); });
  });
  openTarget(decodeURIComponent(location.hash.slice(1)));
  window.addEventListener("hashchange", function () { openTarget(decodeURIComponent(location.hash.slice(1))); });
});
