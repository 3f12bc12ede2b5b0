// A small time-series line chart drawn as inline SVG (no chart library).

import { s } from "./dom.js";
import { rate } from "./format.js";

const PAD = { left: 44, right: 12, top: 12, bottom: 26 };

/** 0, 1, 2, 5, 10, 20, 50… ≥ v (a readable axis maximum). */
function niceMax(v) {
  if (!(v > 0)) return 1;
  const exp = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * exp >= v) return m * exp;
  return 10 * exp;
}

/**
 * series: [{ name, className, points: [{ t, v|null }] }], from/to: epoch ms.
 * width/height: the drawing size in CSS pixels (pass the container's width so text keeps its size).
 */
export function lineChart({ series, from, to, label, unit = "/s", width = 720, height = 220 }) {
  const W = Math.max(280, Math.round(width));
  const H = height;
  const innerW = W - PAD.left - PAD.right;
  const innerH = H - PAD.top - PAD.bottom;
  const max = niceMax(Math.max(0, ...series.flatMap((x) => x.points.map((p) => p.v ?? 0))));
  const x = (t) => PAD.left + ((t - from) / (to - from)) * innerW;
  const y = (v) => PAD.top + innerH - (v / max) * innerH;

  const grid = [];
  for (const f of [0, 0.25, 0.5, 0.75, 1]) {
    const v = max * f;
    grid.push(s("line", { class: "grid", x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v) }));
    grid.push(s("text", { class: "axis-label", x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end" }, rate(v)));
  }
  const minutes = Math.round((to - from) / 60_000);
  // A label every 1, 2, 5, 10, 15 or 30 minutes: the first step that leaves 70 px per label.
  const step = [1, 2, 5, 10, 15, 30].find((m) => (innerW * m) / minutes >= 70) ?? 60;
  for (let m = 0; m <= minutes; m += step) {
    const t = to - m * 60_000;
    grid.push(s("text", { class: "axis-label", x: x(t), y: H - 6, "text-anchor": m === 0 ? "end" : "middle" }, m === 0 ? "now" : `−${m} min`));
  }

  const lines = series.map((one) => {
    const segments = [];
    let current = [];
    for (const p of one.points) {
      if (p.v === null || p.t < from) {
        if (current.length) segments.push(current);
        current = [];
        continue;
      }
      current.push(`${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`);
    }
    if (current.length) segments.push(current);
    return s("g", { class: `series ${one.className ?? ""}` },
      segments.map((pts) => (pts.length === 1
        ? s("circle", { cx: pts[0].split(",")[0], cy: pts[0].split(",")[1], r: 2.5 })
        : s("polyline", { points: pts.join(" ") }))));
  });

  return s("svg", {
    class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label,
  },
  s("title", null, label),
  s("text", { class: "axis-unit", x: 4, y: PAD.top + 4 }, unit),
  grid, lines);
}
