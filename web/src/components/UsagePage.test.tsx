import { screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import type { Api, UsageReport } from "../api/client";
import { ApiError } from "../api/http";
import { axeViolations } from "../test/axe";
import { fakeApi, renderWithApi } from "../test/fakes";
import { UsagePage, perDay } from "./UsagePage";

const day = (date: string, modelId: string, inputTokens: number, outputTokens: number) => ({
  date,
  modelId,
  runs: 1,
  inputTokens,
  outputTokens,
  cacheReadTokens: 10,
  cacheWriteTokens: 0,
  costUsd: 0.5,
});

const report: UsageReport = {
  days: [day("2026-11-02", "b", 300, 30), day("2026-11-01", "a", 100, 10), day("2026-11-02", "a", 200, 20)],
  totals: {
    runs: 3,
    inputTokens: 600,
    outputTokens: 60,
    cacheReadTokens: 30,
    cacheWriteTokens: 0,
    costUsd: 1.5,
  },
};

const NOW = Date.parse("2026-11-30T12:00:00Z");

describe("UsagePage", () => {
  it("asks for the last 30 days, plots them and lists them in a table", async () => {
    const usage = vi.fn(async () => report);
    const { container } = renderWithApi(<UsagePage now={NOW} />, fakeApi({ usage: usage as Api["usage"] }));
    expect(usage).toHaveBeenCalledWith("2026-11-01", "2026-11-30");
    const table = await screen.findByRole("table", { name: "Usage by day and model" });
    expect(within(table).getAllByRole("row")).toHaveLength(4);
    expect(screen.getByText(/3 runs · 600 input and 60 output tokens · \$1\.50/)).toBeInTheDocument();
    expect(container.querySelector(".recharts-wrapper")).not.toBeNull(); // the chart library drew it
    expect(await axeViolations()).toEqual([]);
  });

  it("asks again for the range picked", async () => {
    const user = userEvent.setup();
    const usage = vi.fn(async () => report);
    renderWithApi(<UsagePage now={NOW} />, fakeApi({ usage: usage as Api["usage"] }));
    const from = screen.getByLabelText("From");
    await user.clear(from);
    await user.type(from, "2026-11-20");
    expect(usage).toHaveBeenLastCalledWith("2026-11-20", "2026-11-30");
  });

  it("says why when the API refuses", async () => {
    const usage = vi.fn(() => Promise.reject(new ApiError(400, "invalid_input", "from is after to", "from")));
    renderWithApi(<UsagePage now={NOW} />, fakeApi({ usage: usage as Api["usage"] }));
    expect(await screen.findByRole("alert")).toHaveTextContent("from is after to");
  });

  it("sums a day's models into one bar, days in order", () => {
    expect(perDay(report.days)).toEqual([
      { date: "2026-11-01", input: 100, output: 10, cached: 10, runs: 1 },
      { date: "2026-11-02", input: 500, output: 50, cached: 20, runs: 2 },
    ]);
  });
});
