// Scroll the element `selector` into view.
(selector) => document.querySelector(selector)?.scrollIntoView({behavior: 'smooth'})
