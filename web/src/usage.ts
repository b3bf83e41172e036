// The Usage page (hosted profile): requests and tokens per day over the last 30 days, per model,
// as SVG bar charts the page draws itself (no charting library), a table of the same figures, and
// today's remaining limits. Days are UTC days, as the usage ledger counts them.
import { getUsage, type LimitFigure, type Usage, type UsageRow } from "./api";
import { errorLine, formatNumber, h, type Page, showError, statusLine, svg } from "./dom";

const DAYS = 30;
const DAY_MS = 86_400_000;
/** Distinguishable on light and dark backgrounds, and for the common colour-vision deficiencies (Okabe–Ito). */
const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999"];

interface Series {
  title: string;
  unit: string;
  value(row: UsageRow): number;
}

const SERIES: readonly Series[] = [
  { title: "Requests per day", unit: "requests", value: (row) => row.requests },
  { title: "Tokens per day", unit: "tokens", value: (row) => row.prompt_tokens + row.completion_tokens },
];

/** The last `DAYS` UTC dates, oldest first, ending today. */
export function lastDays(now = Date.now()): string[] {
  return Array.from({ length: DAYS }, (_, index) => new Date(now - (DAYS - 1 - index) * DAY_MS).toISOString().slice(0, 10));
}

export function usagePage(): Page {
  const status = statusLine();
  const error = errorLine();
  const limits = h("dl", { id: "usage-limits", class: "limits" });
  const charts = h("div", { id: "usage-charts", class: "charts" });
  const legend = h("ul", { id: "usage-legend", class: "legend", "aria-label": "Models" });
  const tableBody = h("tbody");
  const table = h(
    "table",
    { id: "usage-table" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ...["Day (UTC)", "Model", "Requests", "Prompt tokens", "Completion tokens"].map((title) => h("th", { scope: "col" }, title)),
      ),
    ),
    tableBody,
  );
  const refreshButton = h("button", { type: "button", id: "usage-refresh", class: "secondary", onclick: () => void load() }, "Refresh");

  async function load(): Promise<void> {
    showError(error, null);
    status.textContent = "Loading…";
    const days = lastDays();
    try {
      const usage = await getUsage(days[0] as string);
      draw(usage, days);
      status.textContent = `Account ${usage.account.name} (tier ${usage.account.tier}), ${days[0]} to ${days[DAYS - 1]} (UTC).`;
    } catch (failure) {
      status.textContent = "";
      showError(error, failure);
    }
  }

  function draw(usage: Usage, days: string[]): void {
    const rows = byDayAndModel(usage.data);
    const models = [...new Set(rows.map((row) => row.model))].sort();
    const colour = (model: string) => PALETTE[models.indexOf(model) % PALETTE.length] as string;
    legend.replaceChildren(
      ...models.map((model) =>
        h(
          "li",
          {},
          svg("svg", { width: 12, height: 12, "aria-hidden": "true" }, svg("rect", { width: 12, height: 12, fill: colour(model) })),
          ` ${model}`,
        ),
      ),
    );
    if (models.length === 0) legend.append(h("li", {}, "No requests in the last 30 days."));
    charts.replaceChildren(...SERIES.map((series) => barChart(series, rows, days, models, colour)));
    tableBody.replaceChildren(
      ...rows
        .sort((a, b) => b.date.localeCompare(a.date) || a.model.localeCompare(b.model))
        .map((row) =>
          h(
            "tr",
            {},
            h("td", {}, row.date),
            h("td", {}, row.model),
            h("td", { class: "number" }, formatNumber(row.requests)),
            h("td", { class: "number" }, formatNumber(row.prompt_tokens)),
            h("td", { class: "number" }, formatNumber(row.completion_tokens)),
          ),
        ),
    );
    limits.replaceChildren(...limitEntries(usage.limits));
  }

  const element = h(
    "section",
    { class: "page usage-page", "aria-labelledby": "usage-title" },
    h("h2", { id: "usage-title" }, "Usage"),
    h("div", { class: "row" }, status, refreshButton),
    error,
    h("h3", {}, "Today's limits"),
    limits,
    h("h3", {}, "The last 30 days"),
    legend,
    charts,
    h("details", {}, h("summary", {}, "The figures as a table"), table),
  );
  return { element, refresh: () => void load() };
}

/** One row per day and model: the server may send several (one per token, and one for the playground's session). */
function byDayAndModel(rows: readonly UsageRow[]): UsageRow[] {
  const merged = new Map<string, UsageRow>();
  for (const row of rows) {
    const key = `${row.date} ${row.model}`;
    const seen = merged.get(key);
    if (!seen) merged.set(key, { ...row });
    else {
      seen.requests += row.requests;
      seen.prompt_tokens += row.prompt_tokens;
      seen.completion_tokens += row.completion_tokens;
    }
  }
  return [...merged.values()];
}

function limitEntries(limits: Usage["limits"]): HTMLElement[] {
  const entries: HTMLElement[] = [];
  const add = (title: string, figure: LimitFigure, reset: string) =>
    entries.push(
      h("dt", {}, title),
      h(
        "dd",
        {},
        h("strong", {}, formatNumber(figure.remaining)),
        ` of ${formatNumber(figure.limit)} left`,
        h("span", { class: "hint" }, ` (${reset} ${duration(figure.resetSeconds)})`),
      ),
    );
  if (limits.requests_per_minute) add("Requests in the last minute", limits.requests_per_minute, "the window frees one in");
  if (limits.tokens_per_day) add("Tokens today (UTC)", limits.tokens_per_day, "resets in");
  if (entries.length === 0) entries.push(h("dt", {}, "Limits"), h("dd", {}, "Your tier has no request or token limits."));
  return entries;
}

function duration(seconds: number): string {
  if (seconds < 60) return `${Math.ceil(seconds)} s`;
  const minutes = Math.ceil(seconds / 60);
  return minutes < 60 ? `${minutes} min` : `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/** The smallest of 1, 2, 5 × 10^n at or above `value` (at least 1), so the axis reads in round numbers. */
function niceCeiling(value: number): number {
  if (value <= 1) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  return ([1, 2, 5, 10].find((step) => step * power >= value) ?? 10) * power;
}

const WIDTH = 720;
const HEIGHT = 220;
const MARGIN = { top: 12, right: 8, bottom: 28, left: 56 };

/** Stacked bars, one per day, one segment per model; every segment has a tooltip (<title>). */
function barChart(
  series: Series,
  rows: readonly UsageRow[],
  days: string[],
  models: string[],
  colour: (model: string) => string,
): HTMLElement {
  const byDay = new Map<string, UsageRow[]>();
  for (const row of rows) byDay.set(row.date, [...(byDay.get(row.date) ?? []), row]);
  const totals = days.map((day) => (byDay.get(day) ?? []).reduce((sum, row) => sum + series.value(row), 0));
  const top = niceCeiling(Math.max(0, ...totals));
  const plotWidth = WIDTH - MARGIN.left - MARGIN.right;
  const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
  const step = plotWidth / days.length;
  const y = (value: number) => MARGIN.top + plotHeight - (value / top) * plotHeight;

  const titleId = `chart-${series.unit}-title`;
  const chart = svg(
    "svg",
    { class: "chart", id: `chart-${series.unit}`, viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", "aria-labelledby": titleId },
    svg(
      "title",
      { id: titleId },
      `${series.title}: ${formatNumber(totals.reduce((a, b) => a + b, 0))} ${series.unit} in 30 days, ${formatNumber(totals[totals.length - 1] ?? 0)} today`,
    ),
  );
  // Counts are whole: a half-way line only where it falls on a whole number.
  for (const tick of [0, top / 2, top].filter(Number.isInteger)) {
    chart.append(
      svg("line", { class: "grid", x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: y(tick), y2: y(tick) }),
      svg("text", { class: "axis", x: MARGIN.left - 6, y: y(tick) + 4, "text-anchor": "end" }, formatNumber(tick)),
    );
  }
  days.forEach((day, index) => {
    const x = MARGIN.left + index * step + step * 0.15;
    let base = 0;
    for (const model of models) {
      const row = byDay.get(day)?.find((entry) => entry.model === model);
      const value = row ? series.value(row) : 0;
      if (value === 0) continue;
      chart.append(
        svg(
          "rect",
          {
            class: "bar",
            x,
            width: step * 0.7,
            y: y(base + value),
            height: y(base) - y(base + value),
            fill: colour(model),
            "data-date": day,
            "data-model": model,
            "data-value": value,
          },
          svg("title", {}, `${day} · ${model}: ${formatNumber(value)} ${series.unit}`),
        ),
      );
      base += value;
    }
    // A label every week, and today's.
    if (index % 7 === 1 || index === days.length - 1) {
      chart.append(
        svg(
          "text",
          { class: "axis", x: MARGIN.left + index * step + step / 2, y: HEIGHT - 8, "text-anchor": "middle" },
          index === days.length - 1 ? "today" : day.slice(5),
        ),
      );
    }
  });
  return h("figure", {}, h("figcaption", {}, series.title), chart);
}
