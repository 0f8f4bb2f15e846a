// axe-core in jsdom: the serious and critical violations of a rendered tree, as in the e2e run
// (the WCAG 2.0/2.1 A and AA tags) plus the rules the walk named, experimental ones too.
import axe from "axe-core";

const NAMED = ["label-content-name-mismatch", "scrollable-region-focusable", "heading-order"];

/** "rule-id: target" for each serious or critical violation (an empty list: clean). */
export async function axeViolations(root: Element = document.body): Promise<string[]> {
  const result = await axe.run(root, {
    runOnly: {
      type: "tag",
      values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice", "experimental"],
    },
    rules: {
      "color-contrast": { enabled: false }, // jsdom does not lay out or paint
      region: { enabled: false }, // a component alone is not a page
      "page-has-heading-one": { enabled: false },
      "landmark-one-main": { enabled: false },
      ...Object.fromEntries(NAMED.map((id) => [id, { enabled: true }])),
    },
  });
  return result.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical" || NAMED.includes(v.id))
    .map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
}
