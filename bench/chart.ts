// A small SVG line-chart writer for the bench's picture: no dependency, nothing fetched at run time.

export interface Series {
  name: string;
  points: ReadonlyArray<readonly [number, number]>;
}

export interface Panel {
  title: string;
  xLabel: string;
  yLabel: string;
  series: readonly Series[];
}

const WIDTH = 460;
const HEIGHT = 300;
const MARGIN = { left: 64, right: 16, top: 32, bottom: 64 };
const COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

function escape(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** Round figures for the axis: 1, 2 or 5 times a power of ten, about five of them up to `max`. */
export function ticks(max: number): number[] {
  if (!(max > 0)) return [0];
  const raw = max / 5;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw)!;
  return Array.from({ length: Math.ceil(max / step) + 1 }, (_, i) => Number((i * step).toPrecision(12)));
}

/** A plot's title, its frame, and its horizontal grid lines labelled with `yTicks` (`y`: a value's height). */
function frame(title: string, offsetX: number, yTicks: readonly number[], y: (value: number) => number): string[] {
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const out = [
    `<text x="${offsetX + WIDTH / 2}" y="18" text-anchor="middle" font-weight="bold">${escape(title)}</text>`,
    `<rect x="${offsetX + MARGIN.left}" y="${MARGIN.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#999"/>`,
  ];
  for (const t of yTicks) {
    out.push(`<line x1="${offsetX + MARGIN.left}" x2="${offsetX + MARGIN.left + plotW}" y1="${y(t)}" y2="${y(t)}" stroke="#eee"/>`);
    out.push(`<text x="${offsetX + MARGIN.left - 6}" y="${y(t) + 4}" text-anchor="end">${t}</text>`);
  }
  return out;
}

function panel(p: Panel, offsetX: number): string {
  // A series without points (a model no workload measured this way) gets no legend either.
  const series = p.series.filter((s) => s.points.length > 0);
  const points = series.flatMap((s) => s.points);
  if (points.length === 0) return "";
  const xs = [...new Set(points.map(([x]) => x))].sort((a, b) => a - b);
  const yTicks = ticks(Math.max(...points.map(([, y]) => y)));
  const yMax = yTicks[yTicks.length - 1]!;
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  // The x values are categories (concurrencies, turns), evenly spaced.
  const x = (value: number) => offsetX + MARGIN.left + (xs.length === 1 ? plotW / 2 : (xs.indexOf(value) / (xs.length - 1)) * plotW);
  const y = (value: number) => MARGIN.top + plotH - (value / yMax) * plotH;
  const out = frame(p.title, offsetX, yTicks, y);
  for (const value of xs) out.push(`<text x="${x(value)}" y="${MARGIN.top + plotH + 16}" text-anchor="middle">${value}</text>`);
  out.push(`<text x="${offsetX + MARGIN.left + plotW / 2}" y="${MARGIN.top + plotH + 34}" text-anchor="middle">${escape(p.xLabel)}</text>`);
  out.push(
    `<text transform="translate(${offsetX + 14} ${MARGIN.top + plotH / 2}) rotate(-90)" text-anchor="middle">${escape(p.yLabel)}</text>`,
  );
  series.forEach((s, i) => {
    const colour = COLOURS[i % COLOURS.length]!;
    const path = s.points.map(([px, py]) => `${x(px).toFixed(1)},${y(py).toFixed(1)}`).join(" ");
    out.push(`<polyline points="${path}" fill="none" stroke="${colour}" stroke-width="2"/>`);
    for (const [px, py] of s.points) out.push(`<circle cx="${x(px).toFixed(1)}" cy="${y(py).toFixed(1)}" r="3" fill="${colour}"/>`);
    const legendY = HEIGHT - 12;
    out.push(`<rect x="${offsetX + MARGIN.left + i * 140}" y="${legendY - 9}" width="10" height="10" fill="${colour}"/>`);
    out.push(`<text x="${offsetX + MARGIN.left + i * 140 + 14}" y="${legendY}">${escape(s.name)}</text>`);
  });
  return out.join("\n");
}

/** Panels side by side in one SVG document. */
export function svgChart(panels: readonly Panel[]): string {
  const shown = panels.filter((p) => p.series.some((s) => s.points.length > 0));
  const body = shown.map((p, i) => panel(p, i * WIDTH)).join("\n");
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${Math.max(1, shown.length) * WIDTH}" height="${HEIGHT}" font-family="sans-serif" font-size="11">\n<rect width="100%" height="100%" fill="white"/>\n${body}\n</svg>\n`;
}

/** Bars of `series` side by side in each category, from 0, with a dashed line at 1 (no change). */
export function svgBars(chart: {
  title: string;
  categories: readonly string[];
  series: ReadonlyArray<{ name: string; values: readonly number[] }>;
  yLabel: string;
}): string {
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const yTicks = ticks(Math.max(1, ...chart.series.flatMap((s) => s.values)));
  const yMax = yTicks[yTicks.length - 1]!;
  const y = (value: number) => MARGIN.top + plotH - (value / yMax) * plotH;
  const slot = plotW / chart.categories.length;
  const bar = (slot * 0.7) / chart.series.length;
  const out = frame(chart.title, 0, yTicks, y);
  out.push(`<line x1="${MARGIN.left}" x2="${MARGIN.left + plotW}" y1="${y(1)}" y2="${y(1)}" stroke="#555" stroke-dasharray="4 3"/>`);
  chart.categories.forEach((category, c) => {
    const left = MARGIN.left + c * slot + slot * 0.15;
    chart.series.forEach((s, i) => {
      const value = s.values[c] ?? 0;
      const colour = COLOURS[i % COLOURS.length]!;
      out.push(
        `<rect x="${(left + i * bar).toFixed(1)}" y="${y(value).toFixed(1)}" width="${(bar - 2).toFixed(1)}" height="${(y(0) - y(value)).toFixed(1)}" fill="${colour}"/>`,
      );
      out.push(
        `<text x="${(left + i * bar + bar / 2).toFixed(1)}" y="${(y(value) - 3).toFixed(1)}" text-anchor="middle">${value.toFixed(2)}</text>`,
      );
    });
    out.push(
      `<text x="${MARGIN.left + c * slot + slot / 2}" y="${MARGIN.top + plotH + 16}" text-anchor="middle">${escape(category)}</text>`,
    );
  });
  out.push(`<text transform="translate(14 ${MARGIN.top + plotH / 2}) rotate(-90)" text-anchor="middle">${escape(chart.yLabel)}</text>`);
  chart.series.forEach((s, i) => {
    const colour = COLOURS[i % COLOURS.length]!;
    out.push(`<rect x="${MARGIN.left + i * 140}" y="${HEIGHT - 21}" width="10" height="10" fill="${colour}"/>`);
    out.push(`<text x="${MARGIN.left + i * 140 + 14}" y="${HEIGHT - 12}">${escape(s.name)}</text>`);
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" font-family="sans-serif" font-size="11">\n<rect width="100%" height="100%" fill="white"/>\n${out.join("\n")}\n</svg>\n`;
}
