// Download the Plotly figure inside the element `elemId` as a `format` ("png" or "svg") file, drawn by
// the browser from the plot on screen with the plotly.js Gradio already loaded.
(elemId, format) => {
  const plot = document.querySelector(`#${elemId} [data-testid="plotly"]`);
  if (!plot || !window.Plotly || !plot.data) return;
  window.Plotly.downloadImage(plot, {format: format, filename: elemId});
}
