// The web app's end-to-end flow in Debian's Chromium (playwright-core, no downloaded browser).
// Run by tests/e2e/test_web.py, which starts `openagents dev` and creates the repository:
//   E2E_BASE_URL, E2E_REPO (a bare repository with a commit on main), E2E_ARTIFACTS, E2E_CHROMIUM,
//   E2E_SCRIPT (the scripted model's file, rewritten here for the turn that is stopped)
// Sign in locally, create a session on the repository, send a message: the agent's answer streams
// in with a `write` tool card; a long turn is stopped with Stop; watch Active → Paused after the
// idle timeout, Resume → Active, Archive → the session is under "Archived". One screenshot a step.
import { mkdirSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const require = createRequire(new URL("../../web/package.json", import.meta.url));
const { chromium } = require("playwright-core");

const BASE = process.env.E2E_BASE_URL;
const REPO = process.env.E2E_REPO;
const ARTIFACTS = process.env.E2E_ARTIFACTS ?? "test-artifacts/e2e";
const CHROMIUM = process.env.E2E_CHROMIUM ?? "/usr/bin/chromium";
const SCRIPT = process.env.E2E_SCRIPT;
// A turn that runs until stopped: slow words, then a command that sleeps.
const LONG_TURN = {
  responses: [
    {
      text: "Starting a long job that takes a while to finish, word by word, so that Stop can end it.",
      toolCalls: [{ name: "bash", input: { command: "sleep 60" } }],
      chunkDelayMs: 150,
    },
    { text: "This answer is never reached." },
  ],
};
// The server's bot check refuses "HeadlessChrome" on session create: a plain desktop browser's.
const USER_AGENT =
  "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36";
const ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

if (!BASE || !REPO) throw new Error("E2E_BASE_URL and E2E_REPO are required");
mkdirSync(ARTIFACTS, { recursive: true });

const started = Date.now();
let shot = 0;
const log = (message) => console.log(`[${((Date.now() - started) / 1000).toFixed(1)} s] ${message}`);

async function screenshot(page, name) {
  shot += 1;
  const path = join(ARTIFACTS, `${String(shot).padStart(2, "0")}-${name}.png`);
  await page.screenshot({ path, fullPage: true });
  log(`screenshot ${path}`);
}

const chip = (page, label) => page.locator(`.session-status [data-state="${label}"]`);

async function waitForChip(page, label, timeout) {
  await chip(page, label).waitFor({ state: "visible", timeout });
  log(`status chip: ${label}`);
}

async function run(page) {
  await page.goto(BASE);
  await page.getByLabel("User name").fill("e2e-user");
  await page.getByLabel(/Full name/).fill("End To End");
  await screenshot(page, "sign-in");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("button", { name: "New session" }).waitFor();
  log("signed in");

  await page.getByRole("button", { name: "New session" }).click();
  const dialog = page.getByRole("dialog", { name: "New session" });
  await dialog.getByLabel("Repository").fill(REPO);
  await dialog.getByLabel("Title (optional)").fill("E2E session");
  await screenshot(page, "new-session");
  await dialog.getByRole("button", { name: "Create session" }).click();
  await page.getByRole("heading", { level: 1, name: "E2E session" }).waitFor();
  await page.locator(".session-status [data-state]").waitFor();
  log(`session created: ${await page.locator(".session-status [data-state]").getAttribute("data-state")}`);
  await screenshot(page, "provisioning");

  await waitForChip(page, "Active", 30_000);
  await page.getByText("Hibernates in").waitFor();
  const composer = page.getByRole("textbox", { name: "Message" });
  await composer.fill("Hello from the e2e test");
  await composer.press("Enter");
  await page.locator(".message-user").filter({ hasText: "Hello from the e2e test" }).waitFor();
  await page.getByRole("tab", { name: /Hello from the e2e test/ }).waitFor(); // the chat is named
  log("message sent");
  // the agent's turn streams in: text (markdown), the write tool card, the final text
  const answer = page.locator(".message-assistant").last();
  await answer.locator(".markdown strong", { hasText: "greeting" }).waitFor({ timeout: 30_000 });
  log("streamed text visible");
  const card = answer.getByRole("article", { name: "Tool write" });
  await card.waitFor();
  await card.locator(".tool-summary", { hasText: "greeting.txt" }).waitFor();
  await card.locator(".diff-added", { hasText: "Hello from the agent" }).waitFor();
  await answer.getByText("holds the greeting").waitFor({ timeout: 30_000 });
  await card.getByText("Done", { exact: true }).waitFor();
  await page.getByRole("button", { name: "Send" }).waitFor(); // the turn ended
  log("turn finished: text, tool card, final text");
  await screenshot(page, "active-with-message");


  await page.getByRole("button", { name: "README.md" }).click();
  await page.getByLabel("Contents of README.md").getByText("Hello from the e2e repository.").waitFor();
  await screenshot(page, "files");

  await waitForChip(page, "Paused", 40_000);
  await page.getByRole("tab", { name: "Activity" }).click();
  await page.getByText("Sandbox hibernated").waitFor();
  await page.getByRole("heading", { name: "Agent runs" }).waitFor();
  await page.locator(".runs li").filter({ hasText: "Completed" }).waitFor();
  await screenshot(page, "paused");

  await page.getByRole("button", { name: "Resume" }).click();
  await waitForChip(page, "Active", 30_000);
  await screenshot(page, "resumed");

  // a long turn, stopped (last before Archive: a stopped turn's hold on hibernation only lapses)
  if (SCRIPT) {
    writeFileSync(SCRIPT, JSON.stringify(LONG_TURN));
    await composer.fill("Run the long job");
    await composer.press("Enter");
    const stop = page.getByRole("button", { name: "Stop" });
    await stop.waitFor({ timeout: 20_000 });
    await page.getByText("Working…").waitFor();
    await page.locator(".message-assistant").last().getByText("Starting a long job").waitFor({ timeout: 20_000 });
    await screenshot(page, "agent-working");
    // a reload mid-turn continues from the chat's checkpoint: the streamed text is there once
    await page.reload();
    await stop.waitFor({ timeout: 20_000 });
    await page.locator(".message-assistant").last().getByText("Starting a long job").waitFor({ timeout: 20_000 });
    await page.waitForTimeout(1_500); // a few more events folded in
    const copies = await page.locator(".message-assistant", { hasText: "Starting a long job" }).count();
    if (copies !== 1) throw new Error(`after the reload the streamed message shows ${copies} times`);
    const texts = await page.locator(".message-assistant").last().locator(".markdown").count();
    if (texts !== 1) throw new Error(`after the reload the streamed message has ${texts} text parts`);
    log("reload mid-turn resumed without duplicates");
    await stop.click();
    await page.getByText("Stopped.").waitFor({ timeout: 15_000 });
    await page.getByRole("button", { name: "Send" }).waitFor();
    await page.getByRole("tab", { name: "Activity" }).click(); // the reload opened Files
    await page.locator(".runs li").filter({ hasText: "Stopped" }).waitFor();
    log("long turn stopped");
    await screenshot(page, "agent-stopped");
  }

  await page.getByRole("button", { name: "Archive" }).click();
  const confirm = page.getByRole("dialog", { name: "Archive session" });
  await confirm.waitFor();
  await screenshot(page, "archive-confirm");
  await confirm.getByRole("button", { name: "Archive" }).click();
  await waitForChip(page, "Archived", 15_000);
  await page.getByRole("button", { name: "Unarchive" }).waitFor();

  await page.getByRole("tab", { name: /Archived/ }).click();
  const panel = page.getByRole("tabpanel").filter({ has: page.getByRole("link") }).first();
  await panel.getByRole("link", { name: /E2E session/ }).waitFor();
  await page.getByRole("tab", { name: /Archived/ }).getByText("1").waitFor();
  log("found under Archived");
  await screenshot(page, "archived-list");
}

async function fitsPhone(page) {
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  if (overflow > 0) throw new Error(`the page is ${overflow}px wider than a 360px screen`);
}

async function phoneAndDark(browser, storage) {
  const context = await browser.newContext({
    userAgent: USER_AGENT,
    viewport: { width: 360, height: 740 },
    colorScheme: "dark",
    storageState: storage,
  });
  const page = await context.newPage();
  await page.goto(BASE);
  await page.getByRole("button", { name: "New session" }).click();
  await page.getByRole("dialog", { name: "New session" }).waitFor();
  await fitsPhone(page);
  await screenshot(page, "phone-dark-new-session");
  await page.keyboard.press("Escape");
  await page.getByRole("tab", { name: /Archived/ }).click();
  await page.getByRole("link", { name: /E2E session/ }).click();
  await page.getByRole("heading", { level: 1, name: "E2E session" }).waitFor();
  await chip(page, "Archived").waitFor();
  await page.locator(".message-user").first().waitFor();
  await fitsPhone(page);
  await screenshot(page, "phone-dark-session");
  await context.close();
}

const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
let failed = false;
const context = await browser.newContext({ userAgent: USER_AGENT, viewport: { width: 1280, height: 900 } });
const page = await context.newPage();
page.setDefaultTimeout(15_000);
page.on("pageerror", (error) => log(`page error: ${error.message}`));
try {
  await run(page);
  await phoneAndDark(browser, await context.storageState());
  log("passed");
} catch (error) {
  failed = true;
  console.error(error);
  await page.screenshot({ path: join(ARTIFACTS, "failure.png"), fullPage: true }).catch(() => undefined);
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
