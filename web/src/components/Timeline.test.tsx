import { screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import { fakeApi, renderWithApi } from "../test/fakes";
import { Timeline } from "./Timeline";

const event = (id: string, type: string, detail: Record<string, unknown> = {}) => ({
  id,
  at: "2026-11-01T10:00:00Z",
  type,
  detail,
});

describe("Timeline", () => {
  it("lists the audit log oldest first and follows the cursor", async () => {
    const events = vi.fn(async (_id: string, cursor?: string | null) =>
      cursor
        ? {
            events: [
              event("e2", "sandbox.hibernated", { from: "hibernating", to: "hibernated", generation: 1 }),
            ],
            nextCursor: null,
          }
        : { events: [event("e1", "session.created", { title: "Lisbon" })], nextCursor: "more" },
    );
    renderWithApi(<Timeline sessionId="s1" />, fakeApi({ events }));
    expect(await screen.findByText("Session created")).toBeInTheDocument();
    expect(screen.getByText("“Lisbon”")).toBeInTheDocument();
    await userEvent.click(screen.getByRole("button", { name: "Load more" }));
    expect(await screen.findByText("Sandbox hibernated")).toBeInTheDocument();
    expect(screen.getByText("hibernating → hibernated · generation 1")).toBeInTheDocument();
    expect(events).toHaveBeenLastCalledWith("s1", "more");
    expect(screen.queryByRole("button", { name: "Load more" })).toBeNull();
    expect(
      screen.getAllByRole("listitem").map((item) => item.querySelector(".event-type")?.textContent),
    ).toEqual(["Session created", "Sandbox hibernated"]);
  });
});
