/**
 * Browser-test plumbing for the dashboard: a real conveyord, headless Debian Chromium
 * (playwright-core), the SDK and the CLI, with every page watched for requests to
 * anything but the node, page errors and console errors.
 * Needs `npm run build` (the daemon runs from dist) and /usr/bin/chromium.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from "playwright-core";
import { NodeProcess, REPO_ROOT, type NodeProcessOptions } from "./node-process.js";
import { connect } from "./sdk.js";

export const CHROMIUM = "/usr/bin/chromium";
export const SHOTS = join(REPO_ROOT, "test-output/screenshots");
const run = promisify(execFile);

export interface Viewport {
  width: number;
  height: number;
}

export const WIDE: Viewport = { width: 1280, height: 800 };
export const NARROW: Viewport = { width: 390, height: 844 };

export class Dashboard {
  private context: BrowserContext | undefined;
  private problems: string[] = [];

  private constructor(
    readonly node: NodeProcess,
    readonly browser: Browser,
    readonly sdk: ReturnType<typeof connect>,
  ) {}

  /**
   * Starts a node and the browser. Rejects with a clear message when Chromium is missing:
   * a missing browser must fail the tests, not skip them.
   */
  static async start(options: NodeProcessOptions = {}): Promise<Dashboard> {
    if (!existsSync(CHROMIUM)) {
      throw new Error(`${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium; CI installs it from .ci/apt-packages)`);
    }
    mkdirSync(SHOTS, { recursive: true });
    const [node, browser] = await Promise.all([
      NodeProcess.start(options),
      chromium.launch({
        executablePath: CHROMIUM,
        headless: true,
        args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
      }),
    ]);
    return new Dashboard(node, browser, connect(node));
  }

  /** `conveyor --server <this node> ...args`; its stdout. */
  async cli(...args: string[]): Promise<string> {
    const { stdout } = await run(process.execPath, [join(REPO_ROOT, "bin/conveyor.js"), "--server", this.node.grpcAddress, ...args]);
    return stdout;
  }

  /**
   * A fresh page on `hash` of `target` (default: this node), watched for external requests
   * and errors; resolves once a view is shown.
   */
  async open(hash = "", viewport: Viewport = WIDE, target: NodeProcess = this.node): Promise<Page> {
    await this.context?.close();
    this.context = await this.browser.newContext({ viewport, reducedMotion: "reduce" });
    const page = await this.context.newPage();
    page.setDefaultTimeout(10_000);
    const origin = `http://${target.httpAddress}/`;
    page.on("request", (req) => {
      if (!req.url().startsWith(origin)) this.problems.push(`external request: ${req.url()}`);
    });
    page.on("pageerror", (err) => this.problems.push(`page error: ${err.message}`));
    page.on("console", (msg) => {
      // Failed fetches while a node is deliberately down are expected, nothing else.
      if (msg.type() === "error" && !/Failed to load resource|ERR_CONNECTION_REFUSED/.test(msg.text())) this.problems.push(`console error: ${msg.text()}`);
    });
    await page.goto(`${origin}${hash}`);
    await page.locator("main h1").first().waitFor();
    return page;
  }

  /** A full-page screenshot from the top (a scrolled page would draw the sticky header mid-page). */
  async screenshot(page: Page, name: string): Promise<void> {
    await page.evaluate("window.scrollTo(0, 0)");
    await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  }

  /** The problems seen since the last call (for an afterEach check). */
  takeProblems(): string[] {
    const seen = this.problems;
    this.problems = [];
    return seen;
  }

  async close(): Promise<void> {
    await this.context?.close();
    await this.browser.close();
    await this.sdk.close();
    await this.node.stop();
    this.node.cleanup();
  }
}

/** Waits until `locator` holds exactly `text` (trimmed). */
export async function hasText(locator: Locator, text: string): Promise<void> {
  const escaped = text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  await locator.filter({ hasText: new RegExp(`^\\s*${escaped}\\s*$`) }).first().waitFor();
}

/** Confirms (or dismisses) the open confirmation dialog by its button name; returns its text. */
export async function answerDialog(page: Page, button: string): Promise<string> {
  const dialog = page.getByRole("dialog");
  await dialog.waitFor();
  const text = (await dialog.textContent()) ?? "";
  await dialog.getByRole("button", { name: button, exact: true }).click();
  await dialog.waitFor({ state: "detached" });
  return text;
}

/** Whether the page scrolls sideways (it must not on a narrow window; tables scroll inside). */
export function pageOverflow(page: Page): Promise<number> {
  return page.evaluate<number>("document.documentElement.scrollWidth - window.innerWidth");
}

/** The text of the focused element (a button's text includes its visually hidden part). */
export function focusedText(page: Page): Promise<string | null> {
  return page.evaluate<string | null>("document.activeElement?.textContent ?? null");
}

/** The data-field of the focused element (form inputs name the request field they fill). */
export function focusedField(page: Page): Promise<string | null> {
  return page.evaluate<string | null>("document.activeElement?.getAttribute('data-field') ?? null");
}
