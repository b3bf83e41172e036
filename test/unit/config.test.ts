import { describe, expect, it } from "vitest";
import os from "node:os";
import path from "node:path";
import { formatSettingsHelp } from "../../src/config/formatSettingsHelp.js";
import { ConfigError, loadConfig } from "../../src/config/loadConfig.js";
import { parseByteSize } from "../../src/config/parseByteSize.js";
import { parseDuration } from "../../src/config/parseDuration.js";
import { settings } from "../../src/config/settings.js";

describe("loadConfig", () => {
  it("uses the defaults when nothing is set", () => {
    const config = loadConfig();
    expect(config.host).toBe("127.0.0.1");
    expect(config.port).toBe("auto");
    expect(config.profile).toBe("local");
    expect(config.modelsDir).toBe(path.join(os.homedir(), ".modelhost/models"));
    expect(config.keepAlive).toBe(5 * 60_000);
    expect(config.threads).toBe("auto");
    expect(config.bodyLimit).toBe(10 * 1024 * 1024);
    // Stored responses of the Responses API: 30 days, as the issue asks.
    expect(config.responseExpiry).toBe(30 * 24 * 3_600_000);
  });

  it("reads --response-expiry (and MODELHOST_RESPONSE_EXPIRY) as a positive duration", () => {
    expect(loadConfig({ flags: { "response-expiry": "12h" } }).responseExpiry).toBe(12 * 3_600_000);
    expect(loadConfig({ env: { MODELHOST_RESPONSE_EXPIRY: "90m" } }).responseExpiry).toBe(90 * 60_000);
    expect(() => loadConfig({ flags: { "response-expiry": "0s" } })).toThrow(/--response-expiry/);
    expect(() => loadConfig({ flags: { "response-expiry": "forever" } })).toThrow(/--response-expiry/);
  });

  it("reads --stream-hold (and MODELHOST_STREAM_HOLD) as a duration from 0 to 1 s, 33 ms by default", () => {
    expect(loadConfig({}).streamHold).toBe(33);
    expect(loadConfig({ flags: { "stream-hold": "0" } }).streamHold).toBe(0);
    expect(loadConfig({ env: { MODELHOST_STREAM_HOLD: "250ms" } }).streamHold).toBe(250);
    expect(() => loadConfig({ flags: { "stream-hold": "2s" } })).toThrow(/--stream-hold/);
    expect(() => loadConfig({ flags: { "stream-hold": "-1" } })).toThrow(/--stream-hold/);
  });

  it("prefers flags over environment variables over defaults", () => {
    const config = loadConfig({ flags: { port: "8081" }, env: { MODELHOST_PORT: "9000", MODELHOST_PARALLEL: "2" } });
    expect(config.port).toBe(8081);
    expect(config.parallel).toBe(2);
  });

  it("names the source of a bad value", () => {
    expect(() => loadConfig({ env: { MODELHOST_PORT: "http" } })).toThrow(ConfigError);
    expect(() => loadConfig({ env: { MODELHOST_PORT: "http" } })).toThrow(/MODELHOST_PORT/);
    expect(() => loadConfig({ flags: { "keep-alive": "soon" } })).toThrow(/--keep-alive/);
    expect(() => loadConfig({ flags: { threads: "0" } })).toThrow(/--threads/);
  });

  it("every setting's default parses, and --help shows each flag, default and variable", () => {
    const help = formatSettingsHelp("serve");
    for (const spec of Object.values(settings)) {
      expect(spec.schema.safeParse(spec.default).success).toBe(true);
      if (spec.commands.includes("serve")) {
        expect(help).toContain(`--${spec.flag}`);
        expect(help).toContain(`env: ${spec.env}`);
        expect(help).toContain(`default: ${spec.default}`);
      }
    }
  });
});

describe("parseDuration", () => {
  it.each([
    ["5m", 300_000],
    ["30s", 30_000],
    ["1h30m", 5_400_000],
    ["250ms", 250],
    ["0", 0],
    ["10", 10_000],
    ["-1", Infinity],
    ["-5m", Infinity],
    ["forever", Infinity],
  ])("%s → %s ms", (text, ms) => expect(parseDuration(text)).toBe(ms));

  it.each(["", "soon", "5 minutes", "m5", "5x"])("refuses %j", (text) => expect(parseDuration(text)).toBeUndefined());
});

describe("parseByteSize", () => {
  it("reads plain bytes and binary units", () => {
    expect(parseByteSize("1024")).toBe(1024);
    expect(parseByteSize("10mb")).toBe(10 * 1024 * 1024);
    expect(parseByteSize("512 KiB")).toBe(512 * 1024);
    expect(parseByteSize("lots")).toBeUndefined();
    expect(parseByteSize("5pb")).toBeUndefined();
  });
});

describe("README", () => {
  it("documents every setting with its flag, variable and default", async () => {
    const { readFileSync } = await import("node:fs");
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
    for (const spec of Object.values(settings)) {
      const row = readme.split("\n").find((line) => line.startsWith(`| \`--${spec.flag}\` |`));
      expect(row, `README row for --${spec.flag}`).toBeDefined();
      expect(row).toContain(`\`${spec.env}\``);
      expect(row).toContain(`\`${spec.default}\``);
    }
  });
});
