// Draw every chart from its JSON, and apply a filter as soon as it changes: the new state
// goes into the URL (a GET form), so every view can be shared. Nothing refreshes by itself.
document.querySelectorAll("[data-figure]").forEach((div) => {
  const figure = JSON.parse(document.getElementById(div.dataset.figure).textContent);
  Plotly.newPlot(div, figure.data, figure.layout, {responsive: true, displaylogo: false});
});
const filters = document.getElementById("filters");
if (filters) {
  filters.addEventListener("change", (event) => {
    if (event.target.matches("select, input[type=checkbox], input[type=date]")) {
      // Drop empty fields so the URL stays short and readable.
      for (const field of filters.elements) {
        if (field.name && field.value === "" && field.type !== "checkbox") field.disabled = true;
      }
      filters.submit();
    }
  });
}
