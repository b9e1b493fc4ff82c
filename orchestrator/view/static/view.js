// Draws the interactive plots of a page from the figure specs the server embedded as JSON.
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("script[type='application/json'][id$='-spec']").forEach(function (spec) {
    var target = document.getElementById(spec.id.replace(/-spec$/, ""));
    if (!target || typeof Plotly === "undefined") return;
    var fig = JSON.parse(spec.textContent);
    Plotly.newPlot(target, fig.data, fig.layout, {displaylogo: false, responsive: true}).then(function () {
      target.setAttribute("data-ready", "1");
    });
  });
});
