// Open the tab labelled `tab` and, once it shows, scroll to the element `selector` in it.
(tab, selector) => {
  const button = [...document.querySelectorAll('[role="tab"]')].find(b => b.textContent.trim() === tab);
  if (button) button.click();
  setTimeout(() => document.querySelector(selector)?.scrollIntoView({behavior: 'smooth'}), 300);
}
