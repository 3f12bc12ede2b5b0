// Hash routing: #/<tab>[/<sub>][?k=v&…] so every view is linkable.

export function parseHash(hash = location.hash) {
  const raw = hash.startsWith("#/") ? hash.slice(2) : "";
  const q = raw.indexOf("?");
  const pathText = q < 0 ? raw : raw.slice(0, q);
  const path = pathText.split("/").filter(Boolean).map(decodeURIComponent);
  const params = new URLSearchParams(q < 0 ? "" : raw.slice(q + 1));
  return { path, params, tab: path[0] ?? "", sub: path[1] ?? "" };
}

/** href(["tasks"], { queue: "x", state: "" }) → "#/tasks?queue=x" (empty values dropped). */
export function href(path, params = {}) {
  const segments = (Array.isArray(path) ? path : [path]).map(encodeURIComponent).join("/");
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") query.set(k, String(v));
  const qs = query.toString();
  return `#/${segments}${qs ? `?${qs}` : ""}`;
}

export function navigate(path, params = {}, { replace = false } = {}) {
  const target = href(path, params);
  if (replace) {
    history.replaceState(null, "", target);
    window.dispatchEvent(new HashChangeEvent("hashchange"));
  } else if (location.hash !== target) {
    location.hash = target;
  }
}
