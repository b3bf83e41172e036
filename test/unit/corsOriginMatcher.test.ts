import { describe, expect, it } from "vitest";
import { corsOriginMatcher } from "../../src/http/corsOriginMatcher.js";

describe("corsOriginMatcher", () => {
  it("allows local origins on any port by default patterns", () => {
    const allow = corsOriginMatcher(["http://localhost:*", "http://127.0.0.1:*"]);
    expect(allow("http://localhost:5173")).toBe(true);
    expect(allow("http://localhost")).toBe(true);
    expect(allow("http://127.0.0.1:3000")).toBe(true);
    expect(allow("http://localhost.evil.com")).toBe(false);
    expect(allow("https://example.com")).toBe(false);
  });

  it("matches exact origins and the wildcard", () => {
    expect(corsOriginMatcher(["https://app.example.com"])("https://app.example.com")).toBe(true);
    expect(corsOriginMatcher(["https://app.example.com"])("https://app.example.com:8443")).toBe(false);
    expect(corsOriginMatcher(["*"])("https://anything.example")).toBe(true);
  });
});
