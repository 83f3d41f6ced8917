// Typesets the equations that pymdownx.arithmatex (generic mode) wraps in `.arithmatex` elements,
// with the KaTeX vendored beside this file (katex/, MIT licence), so equations render offline.
// Only those elements are searched: a "$" in prose or code elsewhere on a page is left alone.
// `document$` is mkdocs-material's page observable; it also fires after instant navigation.
(function () {
  const delimiters = [
    { left: "\\(", right: "\\)", display: false },
    { left: "\\[", right: "\\]", display: true },
  ];
  function typeset(root) {
    for (const el of root.querySelectorAll(".arithmatex")) {
      renderMathInElement(el, { delimiters: delimiters, throwOnError: false });
    }
  }
  if (typeof document$ !== "undefined") {
    document$.subscribe(({ body }) => typeset(body));
  } else {
    document.addEventListener("DOMContentLoaded", () => typeset(document.body));
  }
})();
