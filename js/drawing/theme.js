// Light or dark: an explicit theme wins; "auto" follows JupyterLab's theme, else the OS setting.

export function jupyterTheme(doc = globalThis.document) {
  const light = doc?.body?.dataset?.jpThemeLight;
  if (light === "true") return "light";
  if (light === "false") return "dark";
  return null;
}

export function resolveTheme(theme, host) {
  if (theme === "light" || theme === "dark") return theme;
  const fromJupyter = jupyterTheme(host?.ownerDocument ?? globalThis.document);
  if (fromJupyter) return fromJupyter;
  return globalThis.matchMedia?.("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

/** Calls onChange when JupyterLab switches theme or the OS colour scheme changes; returns a stop function. */
export function watchJupyterTheme(onChange) {
  const observer = typeof MutationObserver === "undefined" ? null : new MutationObserver(onChange);
  if (observer && globalThis.document?.body) {
    observer.observe(globalThis.document.body, { attributes: true, attributeFilter: ["data-jp-theme-light"] });
  }
  const media = globalThis.matchMedia?.("(prefers-color-scheme: dark)");
  media?.addEventListener?.("change", onChange);
  return () => {
    observer?.disconnect();
    media?.removeEventListener?.("change", onChange);
  };
}
