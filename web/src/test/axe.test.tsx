import { render } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { axeViolations } from "./axe";

describe("axeViolations", () => {
  // (label-content-name-mismatch needs layout, which jsdom has not: the e2e run in Chromium has it)
  it("finds a skipped heading level, as in the revert dialog", async () => {
    render(
      <main>
        <h2>Dialog</h2>
        <h4>Restored</h4>
      </main>,
    );
    expect(await axeViolations()).toEqual(["heading-order: h4"]);
  });

  it("is empty on a clean tree", async () => {
    render(
      <main>
        <h2>Dialog</h2>
        <h3>Restored</h3>
        <a href="/s/1">Lisbon</a>
      </main>,
    );
    expect(await axeViolations()).toEqual([]);
  });
});
