// The web app's end-to-end flow in Debian's Chromium (playwright-core, no downloaded browser).
// Run by tests/e2e/test_web.py, which starts `openagents dev` and creates the repository:
//   E2E_BASE_URL, E2E_REPO (a bare repository with a commit on main), E2E_ARTIFACTS, E2E_CHROMIUM,
//   E2E_SCRIPT (the scripted model's file, rewritten here for the turn that is stopped)
// Sign in locally, create a session on the repository, send a message: the agent's answer streams
// in with a `write` tool card and Changes shows the new file; watch Active → Paused after the idle
// timeout, Resume → Active; a skill picked from the composer's `/` menu and an image attached (the
// scripted model's requestLog shows the image block); an approval granted; right after it a long turn reloaded while its
// command runs, and stopped with Stop (the card reads Stopped); Share survives a reload; eight chat
// tabs scroll sideways and the composer stays on screen; Pause says Hibernating at once; Archive →
// the session is under "Archived", offering only what works on it; the Usage page shows the runs.
// The session's repository and a branch are picked in the new-session dialog's pickers. Each step is a screenshot at 1280×800 and at
// 390×844, and axe checks the main screens (no serious or critical violation).
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const require = createRequire(new URL("../../web/package.json", import.meta.url));
const { chromium } = require("playwright-core");
const { AxeBuilder } = require("@axe-core/playwright");

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
// A turn whose command needs approval (`rm -rf`), and what the continued run answers.
const APPROVAL_TURN = {
  responses: [
    {
      text: "I'll clear the build folder; that needs your approval.",
      toolCalls: [{ name: "bash", input: { command: "mkdir -p build && rm -rf build && echo gone" } }],
    },
  ],
};
const AFTER_APPROVAL = { responses: [{ text: "The build folder is gone." }] };
// A turn that only answers, logging what reached the model (the scripted model's "requestLog",
// relative to the script's folder): the attached image must be in the user message.
const REQUEST_LOG = "requests.jsonl";
const PICTURE_TURN = { requestLog: REQUEST_LOG, responses: [{ text: "A one-pixel picture, greeted." }] };
// a real 1×1 PNG (the server sniffs the type from the bytes)
const PIXEL = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
  "base64",
);
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };
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

const settle = (page) => page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));

/**
 * The step at both sizes: `NN-name-desktop.png` (1280×800) and `NN-name-phone.png` (390×844, where
 * the chat and the sandbox are two tabs: `pane` picks the one to show). The page goes back to the
 * desktop size and pane after.
 */
async function screenshot(page, name, { pane = "Chat" } = {}) {
  shot += 1;
  const base = join(ARTIFACTS, `${String(shot).padStart(2, "0")}-${name}`);
  await page.screenshot({ path: `${base}-desktop.png`, fullPage: true });
  await page.setViewportSize(PHONE);
  await settle(page);
  const tabs = page.getByRole("tablist", { name: "Session views" });
  const switched = pane !== "Chat" && (await tabs.count()) > 0;
  if (switched) await tabs.getByRole("tab", { name: pane }).click();
  await page.screenshot({ path: `${base}-phone.png`, fullPage: true });
  if (switched) await tabs.getByRole("tab", { name: "Chat" }).click();
  await page.setViewportSize(DESKTOP);
  await settle(page);
  log(`screenshots ${base}-{desktop,phone}.png`);
}

const violations = [];

/** axe on the screen as it is: serious and critical violations are collected (the run fails on any). */
async function accessible(page, screen) {
  const result = await new AxeBuilder({ page }).withTags(["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]).analyze();
  const bad = result.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  for (const v of bad)
    violations.push(`${screen}: ${v.id} (${v.impact}) ${v.help}: ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
  log(`axe on ${screen}: ${bad.length} serious or critical of ${result.violations.length} violations`);
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
  await accessible(page, "sign-in");
  await screenshot(page, "sign-in");
  await page.getByRole("button", { name: "Sign in" }).click();
  const newSession = page.getByRole("navigation", { name: "Sessions" }).getByRole("button", { name: "New session" });
  await newSession.waitFor();
  log("signed in");
  await page.getByRole("main").getByRole("button", { name: "New session" }).waitFor(); // the empty home page
  await accessible(page, "home");

  await page.getByRole("button", { name: "Preferences" }).click();
  const preferences = page.getByRole("dialog", { name: "Preferences" });
  await preferences.getByRole("combobox", { name: "Default model" }).waitFor();
  await accessible(page, "preferences");
  await preferences.getByRole("button", { name: "Cancel" }).click();

  await newSession.click();
  const dialog = page.getByRole("dialog", { name: "New session" });
  // the picker: the git repositories under OPENAGENTS_LOCAL_REPO_ROOTS, searchable, and a branch
  await dialog.getByLabel("Search repositories").fill("repo.git");
  const repositories = dialog.getByLabel("Repositories", { exact: true });
  await repositories.locator("option", { hasText: /^repo$/ }).waitFor({ state: "attached" });
  await repositories.selectOption({ label: "repo" });
  const picked = await dialog.getByLabel("Repository", { exact: true }).inputValue();
  if (!picked.endsWith("/repo.git")) throw new Error(`the picker filled in ${picked}, not the repository`);
  await dialog.getByLabel("Existing branch").check();
  const branches = dialog.getByLabel("Branches of the repository");
  await branches.locator("option", { hasText: "main (default)" }).waitFor({ state: "attached" });
  await branches.selectOption("e2e-base");
  const named = await dialog.getByLabel("Branch name").inputValue();
  if (named !== "e2e-base") throw new Error(`picking e2e-base named the branch ${named}`);
  log("picked the repository and its branch e2e-base");
  await accessibleAtBothSizes(page, "new-session-picker");
  await screenshot(page, "new-session-picker");
  // the session works on a branch of its own (what the rest of the flow pushes), from the default
  await dialog.getByLabel(/^New branch \(named for you, from main\)/).check();
  await dialog.getByLabel("Title (optional)").fill("E2E session");
  await accessible(page, "new-session");
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
  // the sandbox idles out 15 s after the turn: the files first, while it runs; the tree
  // follows the turn (greeting.txt, written by it, is there without reopening the session)
  await page.getByRole("navigation", { name: "Workspace files" }).getByRole("button", { name: "greeting.txt" }).waitFor();
  log("Files tree shows the turn's new file");
  await page.getByRole("button", { name: "README.md" }).click();
  await page.getByLabel("Contents of README.md").getByText("Hello from the e2e repository.").waitFor();
  await screenshot(page, "files", { pane: "Sandbox" });
  await answer.locator(".message-usage", { hasText: "tokens" }).waitFor();
  await accessible(page, "session-with-answer");
  await screenshot(page, "active-with-message");
  await composerInView(page, "after the first turn");
  await fitsScreen(page, "after the first turn");

  // Share, then a reload: the chat still says it is shared, with its link and Stop sharing
  await page.getByRole("button", { name: "Share", exact: true }).click();
  await page.getByRole("dialog", { name: "What the link will show" }).getByRole("button", { name: "Create link" }).click();
  const shareLink = await page.getByLabel("Share link").inputValue();
  await page.reload();
  await page.getByRole("button", { name: "Stop sharing" }).waitFor();
  if ((await page.getByLabel("Share link").inputValue()) !== shareLink) throw new Error("another share link after the reload");
  await page.getByRole("button", { name: "Stop sharing" }).click();
  await page.getByRole("button", { name: "Share", exact: true }).waitFor();
  log("shared state shown after a reload, and revoked");

  // Changes reloads after the turn: the new file, its added lines coloured
  await page.getByRole("tab", { name: "Changes" }).click();
  const changed = page.locator(".diff-file").filter({ hasText: "greeting.txt" });
  await changed.waitFor({ timeout: 15_000 });
  await changed.locator("summary").click();
  await changed.locator(".diff-added", { hasText: "Hello from the agent" }).waitFor();
  log("Changes shows greeting.txt");
  await accessible(page, "changes");
  await screenshot(page, "changes", { pane: "Sandbox" });

  // ship it from the app: Commit with a generated message, Push, Create PR with a generated title;
  // each leaves its card in the chat, and the header shows the PR badge
  if (SCRIPT) {
    const generated = JSON.parse(readFileSync(SCRIPT, "utf8"));
    writeFileSync(
      SCRIPT,
      JSON.stringify({
        ...generated,
        commitMessage: "Add the greeting file\n\nA greeting written by the agent.",
        pullRequest: { title: "Greet the e2e visitor", body: "Adds greeting.txt." },
      }),
    );
    const ship = page.getByRole("region", { name: "Ship" });
    await ship.getByRole("button", { name: "Commit" }).click();
    await ship.getByRole("status").filter({ hasText: "Add the greeting file" }).waitFor({ timeout: 20_000 });
    const commitCard = page.getByRole("article", { name: "Commit" }).filter({ hasText: "Add the greeting file" });
    await commitCard.waitFor();
    log("committed with a generated message: the commit card is in the chat");
    await ship.getByRole("button", { name: "Push" }).click();
    await ship.getByRole("status").filter({ hasText: "Pushed" }).waitFor({ timeout: 20_000 });
    await page.getByRole("article", { name: "Push" }).filter({ hasText: "Pushed" }).waitFor();
    await ship.getByRole("button", { name: "Create PR" }).click();
    await ship.getByRole("status").filter({ hasText: "Greet the e2e visitor" }).waitFor({ timeout: 20_000 });
    await page.getByRole("article", { name: "Pull request" }).filter({ hasText: "Greet the e2e visitor" }).waitFor();
    await page.locator(".session-header .pr-badge[data-pr-status=open]").waitFor();
    log("pushed, PR opened with a generated title: cards and the PR badge");
    await page.getByRole("region", { name: /Pull request/ }).waitFor(); // merge readiness
    await accessible(page, "shipped");
    await screenshot(page, "shipped", { pane: "Sandbox" });
  }

  // Preview: the repository's static site started from the tab, served from the sandbox through
  // the preview proxy, in a tab of its own (the app runs at 127.0.0.1, so no iframe)
  await page.getByRole("tab", { name: "Preview" }).click();
  await page.getByRole("button", { name: "Start dev server" }).click();
  const opened = page.waitForEvent("popup");
  await page.getByRole("button", { name: "Open 8000 in a new tab" }).click({ timeout: 30_000 });
  const preview = await opened;
  await preview.getByRole("heading", { name: "Hello from the e2e preview" }).waitFor({ timeout: 30_000 });
  if (!/^http:\/\/8000-[a-z2-7]+\.localhost:\d+\/$/.test(preview.url())) throw new Error(`preview at ${preview.url()}`);
  await preview.screenshot({ path: `${ARTIFACTS}/preview.png` });
  await preview.close();
  log("Preview: the sandbox's page through the preview proxy");

  await waitForChip(page, "Paused", 40_000);
  await page.getByRole("tab", { name: "Activity" }).click();
  await page.getByText("Sandbox hibernated").waitFor();
  await page.getByRole("heading", { name: "Agent runs" }).waitFor();
  await page.locator(".runs li").filter({ hasText: "Completed" }).waitFor();
  await screenshot(page, "paused", { pane: "Sandbox" });

  await page.getByRole("button", { name: "Resume" }).click();
  await waitForChip(page, "Active", 30_000);
  await screenshot(page, "resumed");

  if (SCRIPT) await skillAndPicture(page, composer);

  if (SCRIPT) {
    // an approval granted: the run waits, Approve continues it in the same message
    writeFileSync(SCRIPT, JSON.stringify(APPROVAL_TURN));
    await composer.fill("Clear the build folder");
    await composer.press("Enter");
    const waiting = page.locator(".message-assistant").last().getByRole("article", { name: "Tool bash" });
    await waiting.getByText("Needs approval").waitFor({ timeout: 20_000 });
    await page.getByText("Waiting for your answer.").waitFor();
    await accessible(page, "approval");
    writeFileSync(SCRIPT, JSON.stringify(AFTER_APPROVAL));
    await screenshot(page, "approval-requested");
    await waiting.getByRole("button", { name: "Approve" }).click();
    await page.locator(".message-assistant").last().getByText("The build folder is gone.").waitFor({ timeout: 20_000 });
    await waiting.getByText("exit 0").waitFor();
    await page.getByRole("button", { name: "Send" }).waitFor();
    log("approval granted: the command ran and the turn went on");
    await screenshot(page, "approval-granted");
  }

  // right after it, a long turn, reloaded mid-way and stopped
  if (SCRIPT) {
    writeFileSync(SCRIPT, JSON.stringify(LONG_TURN));
    await composer.fill("Run the long job");
    await composer.press("Enter");
    const stop = page.getByRole("button", { name: "Stop" });
    await stop.waitFor({ timeout: 20_000 });
    await page.getByText("Working…").waitFor();
    await page.locator(".message-assistant").last().getByText("Starting a long job").waitFor({ timeout: 20_000 });
    await screenshot(page, "agent-working");
    // a reload mid-turn, while its command runs (no event for a while), continues from the chat's
    // checkpoint at once (sooner than a long poll's 20 s): the streamed text is there once
    const command = page.locator(".message-assistant").last().getByRole("article", { name: "Tool bash" });
    await command.getByText("Running").waitFor({ timeout: 20_000 });
    await page.reload();
    await stop.waitFor({ timeout: 15_000 }); // sooner than the 20 s long poll it used to wait for
    await page.locator(".message-assistant").last().getByText("Starting a long job").waitFor({ timeout: 20_000 });
    await page.waitForTimeout(1_500); // a few more events folded in
    const copies = await page.locator(".message-assistant", { hasText: "Starting a long job" }).count();
    if (copies !== 1) throw new Error(`after the reload the streamed message shows ${copies} times`);
    const texts = await page.locator(".message-assistant").last().locator(".markdown").count();
    if (texts !== 1) throw new Error(`after the reload the streamed message has ${texts} text parts`);
    log("reload mid-turn resumed without duplicates");
    await stop.click();
    await page.getByText("Stopped.").waitFor({ timeout: 15_000 });
    await command.locator(".tool-state", { hasText: "Stopped" }).waitFor(); // not a red "Error"
    if ((await command.locator(".tool-state", { hasText: "Error" }).count()) > 0) throw new Error("a stopped call reads Error");
    await page.getByRole("button", { name: "Send" }).waitFor();
    await page.getByRole("tab", { name: "Activity" }).click(); // the reload opened Files
    await page.locator(".runs li").filter({ hasText: "Stopped" }).waitFor();
    log("long turn stopped");
    await screenshot(page, "agent-stopped", { pane: "Sandbox" });
  }

  // many chats: the tabs scroll sideways in one row, the composer stays in view at 1280×800
  for (let i = 0; i < 7; i += 1) {
    await page.getByRole("button", { name: "New chat" }).click();
    await page.getByRole("tablist", { name: "Chats" }).getByRole("tab").nth(i + 1).waitFor();
  }
  await composerInView(page, "with eight chat tabs");
  await fitsScreen(page, "with eight chat tabs");
  await oneRowOfTabs(page);
  await accessible(page, "many-chats");
  await screenshot(page, "many-chats");

  // Pause: Hibernating at once (no countdown, no Pause button), then Paused
  if (await page.getByRole("button", { name: "Pause" }).isVisible()) {
    await page.getByRole("button", { name: "Pause" }).click();
    await waitForChip(page, "Hibernating", 2_000);
    if (await page.getByText("Hibernates in").isVisible()) throw new Error("a countdown while hibernating");
    await waitForChip(page, "Paused", 40_000);
    log("Pause: Hibernating at once, then Paused");
  }

  await page.getByRole("button", { name: "Archive" }).click();
  const confirm = page.getByRole("dialog", { name: "Archive session" });
  await confirm.waitFor();
  await accessible(page, "archive-confirm");
  await screenshot(page, "archive-confirm");
  await confirm.getByRole("button", { name: "Archive" }).click();
  await waitForChip(page, "Archived", 15_000);
  await page.getByRole("button", { name: "Unarchive" }).waitFor();
  await page.getByRole("textbox", { name: "Message" }).and(page.locator(":disabled")).waitFor();
  await page.getByText("Unarchive to continue.", { exact: true }).waitFor();
  for (const name of ["Revert to before this turn", "New chat", "Rename chat", "Delete chat", "Delete from here"])
    if ((await page.getByRole("button", { name }).count()) > 0) throw new Error(`an archived session offers ${name}`);
  log("archived: only what works on it");

  await page.getByRole("tab", { name: /Archived/ }).click();
  const panel = page.getByRole("tabpanel").filter({ has: page.getByRole("link") }).first();
  await panel.getByRole("link", { name: /E2E session/ }).waitFor();
  await page.getByRole("tab", { name: /Archived/ }).getByText("1").waitFor();
  log("found under Archived");
  await accessible(page, "archived-list");
  await screenshot(page, "archived-list");

  // the Usage page: this user's runs of today, their tokens and cost (a price is configured)
  await page.getByRole("link", { name: "Usage" }).click();
  await page.getByRole("heading", { level: 1, name: "Usage" }).waitFor();
  const usage = page.getByRole("table", { name: "Usage by day and model" });
  const row = usage.getByRole("row").filter({ hasText: "scripted/default" });
  await row.waitFor();
  const cells = await row.getByRole("cell").allInnerTexts();
  if (!(Number(cells[2]) >= 2) || !/^\$\d/.test(cells[5] ?? ""))
    throw new Error(`the usage row is not this user's priced runs: ${cells.join(" | ")}`);
  log(`Usage: ${cells.join(" | ")}`);
  await accessibleAtBothSizes(page, "usage");
  await page.setViewportSize(PHONE);
  await settle(page);
  await fitsPhone(page); // the table scrolls in its own region, the chart takes the screen's width
  await page.setViewportSize(DESKTOP);
  await screenshot(page, "usage");
}

/**
 * The composer's `/` menu offers the repository's skill (.agents/skills/e2e-greeter/SKILL.md) and
 * picking it fills in `/e2e-greeter `; an image attached with the file input is uploaded, sent with
 * the text, shown in the chat, and reaches the scripted model as an image block (its requestLog).
 */
async function skillAndPicture(page, composer) {
  writeFileSync(SCRIPT, JSON.stringify(PICTURE_TURN));
  await composer.fill("/e2e");
  const menu = page.getByRole("listbox", { name: "Skills" });
  const option = menu.getByRole("option", { name: /\/e2e-greeter/ });
  await option.waitFor({ timeout: 20_000 });
  await option.getByText("Greets whoever runs the e2e test").waitFor(); // the front matter's description
  if ((await composer.getAttribute("aria-activedescendant")) !== (await option.getAttribute("id")))
    throw new Error("the message box does not point at the highlighted skill");
  await accessibleAtBothSizes(page, "skill-menu");
  await screenshot(page, "skill-menu");
  await composer.press("Enter"); // picks the highlighted skill, does not send
  if ((await composer.inputValue()) !== "/e2e-greeter ") throw new Error(`picking the skill left "${await composer.inputValue()}"`);
  await menu.waitFor({ state: "detached" });
  await composer.press("End");
  await composer.pressSequentially("say hello to this picture");
  log("skill picked from the / menu");

  await page.locator(".composer input[type=file]").setInputFiles({ name: "pixel.png", mimeType: "image/png", buffer: PIXEL });
  const chip = page.getByRole("list", { name: "Attached files" }).getByRole("listitem").filter({ hasText: "pixel.png" });
  await chip.waitFor();
  const send = page.getByRole("button", { name: "Send" });
  await page.waitForFunction(() => {
    const button = [...document.querySelectorAll(".composer button[type=submit]")].find((b) => b.textContent === "Send");
    return button !== undefined && !button.disabled;
  }); // uploaded: Send is on again
  if ((await chip.textContent()).includes("not attached")) throw new Error(`the image was refused: ${await chip.textContent()}`);
  await accessibleAtBothSizes(page, "composer-attachment");
  await screenshot(page, "composer-attachment");
  await send.click();
  const sent = page.locator(".message-user").last();
  await sent.getByText("say hello to this picture").waitFor();
  await sent.getByRole("img", { name: "pixel.png" }).waitFor(); // the thumbnail, read back from the API
  await page.locator(".message-assistant").last().getByText("A one-pixel picture, greeted.").waitFor({ timeout: 20_000 });
  await page.getByRole("button", { name: "Send" }).waitFor();
  log("image sent with the skill's message");

  const path = join(dirname(SCRIPT), REQUEST_LOG);
  if (!existsSync(path)) throw new Error("the scripted model wrote no requestLog");
  const requests = readFileSync(path, "utf8").trim().split("\n").map((line) => JSON.parse(line));
  const turn = requests.find((request) => request.purpose === "turn" && request.step === 0);
  if (!turn) throw new Error(`no turn request in the requestLog: ${JSON.stringify(requests).slice(0, 500)}`);
  const user = turn.messages.filter((message) => message.role === "user").at(-1);
  const blocks = user?.content ?? [];
  const image = blocks.find((block) => block.type === "image");
  const sha256 = createHash("sha256").update(PIXEL).digest("hex");
  if (!image || image.mediaType !== "image/png" || image.size !== PIXEL.length || image.sha256 !== sha256)
    throw new Error(`the model did not get the image: ${JSON.stringify(blocks)}`);
  if (!blocks.some((block) => block.type === "text" && block.text.includes("/e2e-greeter say hello to this picture")))
    throw new Error(`the model did not get the skill's message: ${JSON.stringify(blocks)}`);
  log(`the model got the image block (${image.size} bytes, sha256 ${image.sha256.slice(0, 12)}…) and the /e2e-greeter text`);
  await sent.scrollIntoViewIfNeeded();
  await accessibleAtBothSizes(page, "session-with-picture");
  await screenshot(page, "picture-sent");
}

/** axe at 1280×800 and at 390×844 (the page goes back to the desktop size after). */
async function accessibleAtBothSizes(page, screen) {
  await accessible(page, `${screen} (desktop)`);
  await page.setViewportSize(PHONE);
  await settle(page);
  await accessible(page, `${screen} (phone)`);
  await page.setViewportSize(DESKTOP);
  await settle(page);
}

/** The composer and the Send or Stop button are inside the viewport (nothing below the fold). */
async function composerInView(page, when) {
  const box = await page.locator(".composer").boundingBox();
  const height = page.viewportSize().height;
  if (!box || box.y < 0 || box.y + box.height > height + 1)
    throw new Error(`the composer is at ${box?.y}..${box && box.y + box.height}px of a ${height}px screen ${when}`);
  const scrolled = await page.evaluate(() => document.scrollingElement.scrollHeight - window.innerHeight);
  if (scrolled > 1) throw new Error(`the session page scrolls ${scrolled}px ${when}: it should fit the screen`);
}

/** The chat tabs keep to one row and scroll sideways. */
async function oneRowOfTabs(page) {
  const tablist = page.getByRole("tablist", { name: "Chats" });
  const tabs = tablist.getByRole("tab");
  const first = await tabs.first().boundingBox();
  const last = await tabs.last().boundingBox();
  if (!first || !last || Math.abs(first.y - last.y) > 2) throw new Error("the chat tabs wrap into rows");
  const sideways = await tablist.evaluate((el) => el.scrollWidth > el.clientWidth);
  return sideways;
}

/** Nothing is wider than the screen (the widest elements past its edge are named when one is). */
async function fitsScreen(page, when = "") {
  const found = await page.evaluate(() => {
    const overflow = document.documentElement.scrollWidth - window.innerWidth;
    if (overflow <= 0) return null;
    const wide = [...document.querySelectorAll("body *")]
      .map((el) => ({ el, right: el.getBoundingClientRect().right }))
      .filter(({ right }) => right > window.innerWidth + 1)
      .sort((a, b) => b.right - a.right)
      .slice(0, 5)
      .map(({ el, right }) => `${el.tagName.toLowerCase()}.${[...el.classList].join(".")} → ${Math.round(right)}px`);
    return { overflow, wide };
  });
  if (found)
    throw new Error(
      `the page is ${found.overflow}px wider than the ${page.viewportSize().width}px screen ${when}: ${found.wide.join("; ")}`,
    );
}

const fitsPhone = fitsScreen;

/** A phone's layout: the header in one row, the composer at the bottom of the viewport. */
async function phoneLayout(page) {
  const topbar = await page.locator(".topbar").boundingBox();
  const button = await page.locator(".topbar button").first().boundingBox();
  if (!topbar || !button || topbar.height > button.height * 1.8)
    throw new Error(`the header is ${topbar?.height}px high: more than one row`);
  const footer = await page.locator(".chat-footer").boundingBox();
  const height = page.viewportSize().height;
  if (!footer || Math.abs(footer.y + footer.height - height) > 2)
    throw new Error(`the composer ends at ${footer && footer.y + footer.height}px, not at the bottom (${height}px)`);
}

/** The phone in dark mode (390×844; nothing scrolls sideways at 360 either): list, dialog, session. */
async function phoneAndDark(browser, storage) {
  const context = await browser.newContext({
    userAgent: USER_AGENT,
    viewport: PHONE,
    colorScheme: "dark",
    storageState: storage,
  });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  await page.goto(BASE);
  await page.getByRole("button", { name: "New session" }).click();
  await page.getByRole("dialog", { name: "New session" }).waitFor();
  await fitsPhone(page);
  await accessible(page, "phone-dark-new-session");
  await page.screenshot({ path: join(ARTIFACTS, "90-phone-dark-new-session.png"), fullPage: true });
  await page.keyboard.press("Escape");
  await page.getByRole("tab", { name: /Archived/ }).click();
  await page.getByRole("link", { name: /E2E session/ }).click();
  await page.getByRole("heading", { level: 1, name: "E2E session" }).waitFor();
  await chip(page, "Archived").waitFor();
  await page.getByRole("tab", { name: /Hello from the e2e test/ }).click(); // the first chat, of eight
  await page.locator(".message-user").first().waitFor();
  await page.locator(".message-assistant").last().waitFor();
  await settle(page);
  await fitsPhone(page);
  await phoneLayout(page);
  if (!(await oneRowOfTabs(page))) throw new Error("eight chat tabs do not scroll sideways on a phone");
  // the chat opens at its end: the last message is on screen above the composer
  const lastMessage = await page.locator(".message").last().boundingBox();
  const footer = await page.locator(".chat-footer").boundingBox();
  if (!lastMessage || !footer || lastMessage.y > footer.y || lastMessage.y + lastMessage.height < 0)
    throw new Error(`the phone opens the chat away from its end (last message at ${lastMessage?.y}px, composer at ${footer?.y}px)`);
  await accessible(page, "phone-dark-session");
  await page.screenshot({ path: join(ARTIFACTS, "91-phone-dark-session.png") }); // the viewport: the composer at its bottom
  // the sandbox panel is a tab beside the chat
  await page.getByRole("tablist", { name: "Session views" }).getByRole("tab", { name: "Sandbox" }).click();
  await page.getByRole("heading", { name: "Sandbox" }).waitFor();
  if (await page.locator(".chat-area").isVisible()) throw new Error("the chat shows under the Sandbox tab");
  await accessible(page, "phone-dark-sandbox");
  await page.screenshot({ path: join(ARTIFACTS, "92-phone-dark-sandbox.png"), fullPage: true });
  await page.setViewportSize({ width: 360, height: 740 });
  await settle(page);
  await fitsPhone(page);
  log("phone: one-row header, composer at the bottom, the sandbox as a tab, nothing wider than 360 px");
  await context.close();
}

const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
let failed = false;
const context = await browser.newContext({ userAgent: USER_AGENT, viewport: DESKTOP });
const page = await context.newPage();
page.setDefaultTimeout(15_000);
page.on("pageerror", (error) => log(`page error: ${error.message}`));
try {
  await run(page);
  await phoneAndDark(browser, await context.storageState());
  if (violations.length > 0)
    throw new Error(`axe found serious or critical violations:\n${violations.join("\n")}`);
  log("passed");
} catch (error) {
  failed = true;
  console.error(error);
  await page.screenshot({ path: join(ARTIFACTS, "failure.png"), fullPage: true }).catch(() => undefined);
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
