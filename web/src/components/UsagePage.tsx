// The caller's own usage (GET /api/usage): tokens a day as a chart (recharts), and the same
// figures in a table (what a screen reader reads; the chart is its picture).
import { useCallback, useId, useState } from "react";
import { Bar, BarChart, CartesianGrid, Legend, Tooltip, XAxis, YAxis } from "recharts";
import type { UsageDay, UsageReport } from "../api/client";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";
import { useLoader } from "../hooks/useLoader";

const DAY_MS = 86_400_000;
const isoDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** One bar a day: the tokens of every model that day summed. */
export function perDay(days: UsageDay[]) {
  const byDate = new Map<
    string,
    { date: string; input: number; output: number; cached: number; runs: number }
  >();
  for (const day of days) {
    const row = byDate.get(day.date) ?? { date: day.date, input: 0, output: 0, cached: 0, runs: 0 };
    row.input += day.inputTokens;
    row.output += day.outputTokens;
    row.cached += day.cacheReadTokens + day.cacheWriteTokens;
    row.runs += day.runs;
    byDate.set(day.date, row);
  }
  return [...byDate.values()].sort((a, b) => a.date.localeCompare(b.date));
}

const money = (usd: number | null) => (usd === null ? "—" : `$${usd.toFixed(2)}`);

function Report({ report }: { report: UsageReport }) {
  const rows = perDay(report.days);
  if (report.days.length === 0) return <p className="muted">No runs in these days.</p>;
  return (
    <>
      <p>
        {report.totals.runs} runs · {report.totals.inputTokens.toLocaleString()} input and{" "}
        {report.totals.outputTokens.toLocaleString()} output tokens · {money(report.totals.costUsd)}
      </p>
      {/* hidden from assistive technology (the table holds the same figures), so no keyboard
          layer either; it takes the screen's width, never wider */}
      <figure className="usage-chart" aria-hidden="true">
        <BarChart
          responsive
          style={{ width: "100%", maxWidth: 640, height: 260 }}
          data={rows}
          accessibilityLayer={false}
        >
          <CartesianGrid strokeDasharray="3 3" />
          <XAxis dataKey="date" />
          <YAxis />
          <Tooltip />
          <Legend />
          <Bar dataKey="input" name="Input tokens" stackId="t" fill="#4f6bed" isAnimationActive={false} />
          <Bar dataKey="output" name="Output tokens" stackId="t" fill="#1f9d74" isAnimationActive={false} />
          <Bar dataKey="cached" name="Cache tokens" stackId="t" fill="#b0b7c3" isAnimationActive={false} />
        </BarChart>
      </figure>
      <div className="usage-table-scroll" role="region" aria-label="Usage table" tabIndex={0}>
        <table className="usage-table">
          <caption>Usage by day and model</caption>
          <thead>
            <tr>
              <th scope="col">Day</th>
              <th scope="col">Model</th>
              <th scope="col">Runs</th>
              <th scope="col">Input tokens</th>
              <th scope="col">Output tokens</th>
              <th scope="col">Cost</th>
            </tr>
          </thead>
          <tbody>
            {report.days.map((day) => (
              <tr key={`${day.date}-${day.modelId}`}>
                <td>{day.date}</td>
                <td>{day.modelId}</td>
                <td>{day.runs}</td>
                <td>{day.inputTokens.toLocaleString()}</td>
                <td>{day.outputTokens.toLocaleString()}</td>
                <td>{money(day.costUsd)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}

/** The Usage page: the last 30 days by default, any range picked. */
export function UsagePage({ now }: { now?: number }) {
  const api = useApi();
  const id = useId();
  const [from, setFrom] = useState(() => isoDay((now ?? Date.now()) - 29 * DAY_MS));
  const [to, setTo] = useState(() => isoDay(now ?? Date.now()));
  const load = useCallback(() => api.usage(from, to), [api, from, to]);
  const { data, error } = useLoader(load);
  return (
    <section className="usage" aria-labelledby={`${id}-title`}>
      <h1 id={`${id}-title`}>Usage</h1>
      <div className="toolbar">
        <label htmlFor={`${id}-from`}>From</label>
        <input
          id={`${id}-from`}
          type="date"
          value={from}
          max={to}
          onChange={(e) => setFrom(e.target.value)}
        />
        <label htmlFor={`${id}-to`}>To</label>
        <input id={`${id}-to`} type="date" value={to} min={from} onChange={(e) => setTo(e.target.value)} />
      </div>
      {error !== undefined && <p role="alert">Could not load usage: {errorMessage(error)}</p>}
      {data ? <Report report={data} /> : error === undefined && <p className="muted">Loading usage…</p>}
    </section>
  );
}
