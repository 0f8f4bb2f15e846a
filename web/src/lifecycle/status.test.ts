import { describe, expect, it } from "vitest";
import { sandboxStatus } from "../test/fakes";
import {
  FAST_POLL_MS,
  POLL_MS,
  deriveChip,
  formatCountdown,
  msUntilHibernation,
  nextPollDelay,
  stateBadge,
} from "./status";

describe("deriveChip", () => {
  const cases: Array<[string, Parameters<typeof deriveChip>, string]> = [
    ["archived session", [true, sandboxStatus({ state: "active" })], "Archived"],
    ["archived state", [false, sandboxStatus({ state: "archived" }, { status: "no_sandbox" })], "Archived"],
    [
      "provisioning",
      [false, sandboxStatus({ state: "provisioning" }, { status: "no_sandbox" })],
      "Provisioning",
    ],
    [
      "restoring",
      [false, sandboxStatus({ state: "restoring" }, { status: "paused", hasSnapshot: true })],
      "Restoring",
    ],
    [
      "a resume in flight",
      [false, sandboxStatus({ state: "hibernated" }, { status: "paused", hasSnapshot: true }), true],
      "Restoring",
    ],
    ["hibernating", [false, sandboxStatus({ state: "hibernating" })], "Hibernating"],
    [
      "hibernated with a snapshot",
      [false, sandboxStatus({ state: "hibernated" }, { status: "paused", hasSnapshot: true })],
      "Paused",
    ],
    ["active", [false, sandboxStatus({ state: "active" })], "Active"],
    [
      "no state, snapshot (unarchived)",
      [false, sandboxStatus({ state: null }, { status: "paused", hasSnapshot: true })],
      "Paused",
    ],
    [
      "no state, no snapshot",
      [false, sandboxStatus({ state: null }, { status: "no_sandbox" })],
      "No sandbox",
    ],
    [
      "hibernated without a snapshot",
      [false, sandboxStatus({ state: "hibernated" }, { status: "no_sandbox" })],
      "No sandbox",
    ],
  ];
  it.each(cases)("%s", (_, args, label) => {
    expect(deriveChip(...args).label).toBe(label);
  });

  it("carries a failed sandbox's error", () => {
    const chip = deriveChip(
      false,
      sandboxStatus({ state: "failed", error: "Provisioning failed: boom" }, { status: "no_sandbox" }),
    );
    expect(chip).toEqual({ label: "Failed", detail: "Provisioning failed: boom" });
  });
});

describe("stateBadge", () => {
  it("maps the list's lifecycle state", () => {
    expect(stateBadge("hibernated", false)).toBe("Paused");
    expect(stateBadge("provisioning", false)).toBe("Provisioning");
    expect(stateBadge(null, false)).toBe("No sandbox");
    expect(stateBadge("active", true)).toBe("Archived");
  });
});

describe("the hibernation countdown", () => {
  it("runs on the server's clock from when the status arrived", () => {
    const status = sandboxStatus({ serverTime: 1_000_000, hibernateAfter: 1_090_000 });
    // received at local time 5_000 (the local clock may be anywhere), 10 s ago
    expect(msUntilHibernation(status, 5_000, 15_000)).toBe(80_000);
    expect(msUntilHibernation(status, 5_000, 500_000)).toBe(0);
  });

  it("is absent unless an active sandbox has a hibernation time", () => {
    expect(msUntilHibernation(sandboxStatus({ hibernateAfter: null }), 0, 0)).toBeNull();
    expect(msUntilHibernation(sandboxStatus({ state: "hibernated" }), 0, 0)).toBeNull();
  });

  it("formats minutes and hours", () => {
    expect(formatCountdown(5_001)).toBe("0:06");
    expect(formatCountdown(29 * 60_000 + 59_000)).toBe("29:59");
    expect(formatCountdown(3_600_000 + 61_000)).toBe("1:01:01");
  });
});

describe("nextPollDelay", () => {
  it("polls every 15 s when nothing moves", () => {
    expect(nextPollDelay(sandboxStatus({ state: "hibernated", hibernateAfter: null }))).toBe(POLL_MS);
  });

  it("polls fast while the server is between states", () => {
    expect(nextPollDelay(sandboxStatus({ state: "provisioning" }))).toBe(FAST_POLL_MS);
    expect(nextPollDelay(sandboxStatus({ state: "restoring" }))).toBe(FAST_POLL_MS);
  });

  it("asks again just after an active sandbox is due to hibernate", () => {
    expect(nextPollDelay(sandboxStatus({ serverTime: 0, hibernateAfter: 4_000 }))).toBe(5_000);
    expect(nextPollDelay(sandboxStatus({ serverTime: 0, hibernateAfter: 600_000 }))).toBe(POLL_MS);
    expect(nextPollDelay(sandboxStatus({ serverTime: 10_000, hibernateAfter: 0 }))).toBe(1_000);
  });
});
