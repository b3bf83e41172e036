// The Tokens page (hosted profile): create a personal access token, shown once with a copy
// button; list the account's tokens; revoke one.
import { createToken, listTokens, revokeToken, type TokenInfo } from "./api";
import { copyButton, errorLine, field, formatTime, h, type Page, showError, statusLine } from "./dom";

const DAY_SECONDS = 86_400;

export function tokensPage(): Page {
  const name = h("input", { id: "token-name", type: "text", required: true, maxlength: 100, autocomplete: "off", placeholder: "laptop" });
  const expiry = h(
    "select",
    { id: "token-expiry" },
    h("option", { value: "7" }, "7 days"),
    h("option", { value: "30" }, "30 days"),
    h("option", { value: "60" }, "60 days"),
    h("option", { value: "90", selected: true }, "90 days"),
    h("option", { value: "custom" }, "On a date…"),
    h("option", { value: "never" }, "Never"),
  );
  const date = h("input", { id: "token-expiry-date", type: "date" });
  const dateField = field("Expires at the end of (UTC)", date);
  dateField.hidden = true;
  expiry.addEventListener("change", () => {
    dateField.hidden = expiry.value !== "custom";
    date.required = expiry.value === "custom";
    date.min = new Date(Date.now() + DAY_SECONDS * 1000).toISOString().slice(0, 10);
  });
  const create = h("button", { type: "submit", id: "token-create" }, "Create token");
  const formError = errorLine();
  const form = h(
    "form",
    { id: "token-form", class: "row" },
    field("Name", name),
    field("Expires", expiry),
    dateField,
    h("div", { class: "buttons" }, create),
  );

  const secret = h("code", { id: "token-value" });
  const created = h(
    "div",
    { id: "token-created", class: "notice", hidden: true, role: "region", "aria-label": "New token" },
    h("p", {}, h("strong", {}, "Copy your new token now."), " It is shown only this once; the server keeps only its hash."),
    h("p", { class: "secret" }, secret),
    h(
      "div",
      { class: "buttons" },
      copyButton("Copy token", () => secret.textContent ?? ""),
      h("button", { type: "button", class: "secondary", onclick: () => hideSecret() }, "Done"),
    ),
  );
  const hideSecret = () => {
    secret.textContent = "";
    created.hidden = true;
  };

  const rows = h("tbody");
  const listStatus = statusLine();
  const listError = errorLine();
  const table = h(
    "table",
    { id: "token-list" },
    h(
      "caption",
      {},
      "Your tokens ",
      h("button", { type: "button", id: "token-refresh", class: "secondary small", onclick: () => void load() }, "Refresh"),
    ),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ...["Name", "Prefix", "Created (UTC)", "Last used (UTC)", "Expires (UTC)", "Status", ""].map((title) =>
          h("th", { scope: "col" }, title),
        ),
      ),
    ),
    rows,
  );

  function expiresAt(): number | null | Error {
    const now = Math.floor(Date.now() / 1000);
    switch (expiry.value) {
      case "never":
        return null;
      case "custom": {
        // As the CLI's `--expires YYYY-MM-DD`: the end of that day, UTC.
        const end = Date.parse(`${date.value}T23:59:59Z`);
        if (Number.isNaN(end)) return new Error("Pick the expiry date.");
        if (end / 1000 <= now) return new Error("The expiry date must be in the future.");
        return Math.floor(end / 1000);
      }
      default:
        return now + Number(expiry.value) * DAY_SECONDS;
    }
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    showError(formError, null);
    const expires = expiresAt();
    if (expires instanceof Error) return showError(formError, expires);
    create.disabled = true;
    try {
      const token = await createToken(name.value.trim(), expires);
      secret.textContent = token.token;
      created.hidden = false;
      name.value = "";
      await load();
    } catch (failure) {
      showError(formError, failure);
    } finally {
      create.disabled = false;
    }
  });

  function statusOf(token: TokenInfo): string {
    if (token.revoked_at !== null) return `Revoked ${formatTime(token.revoked_at)} UTC`;
    if (token.expires_at !== null && token.expires_at * 1000 <= Date.now()) return "Expired";
    return "Active";
  }

  function row(token: TokenInfo): HTMLTableRowElement {
    const active = statusOf(token) === "Active";
    const revoke = h("button", { type: "button", class: "danger small", "aria-label": `Revoke ${token.name}` }, "Revoke");
    revoke.addEventListener("click", async () => {
      if (!window.confirm(`Revoke the token "${token.name}" (${token.prefix}…)? Programs using it stop working at once.`)) return;
      revoke.disabled = true;
      try {
        await revokeToken(token.id);
        listStatus.textContent = `Revoked "${token.name}".`;
        await load();
      } catch (failure) {
        showError(listError, failure);
        revoke.disabled = false;
      }
    });
    return h(
      "tr",
      { "data-token-id": token.id, class: active ? "" : "inactive" },
      h("td", {}, token.name),
      h("td", {}, h("code", {}, `${token.prefix}…`)),
      h("td", {}, formatTime(token.created_at)),
      h("td", {}, token.last_used_at === null ? "Never" : formatTime(token.last_used_at)),
      h("td", {}, token.expires_at === null ? "Never" : formatTime(token.expires_at)),
      h("td", { class: "token-status" }, statusOf(token)),
      h("td", {}, active ? revoke : null),
    );
  }

  async function load(): Promise<void> {
    showError(listError, null);
    try {
      const tokens = await listTokens();
      rows.replaceChildren(...tokens.map(row));
      if (tokens.length === 0) rows.append(h("tr", {}, h("td", { colspan: 7, class: "empty" }, "No tokens yet.")));
    } catch (failure) {
      showError(listError, failure);
    }
  }

  const element = h(
    "section",
    { class: "page tokens-page", "aria-labelledby": "tokens-title" },
    h("h2", { id: "tokens-title" }, "Tokens"),
    h(
      "p",
      { class: "hint" },
      "Personal access tokens for the API (/v1 and the native API). Send one as ",
      h("code", {}, "Authorization: Bearer …"),
      ".",
    ),
    form,
    formError,
    created,
    listError,
    listStatus,
    table,
  );
  return { element, refresh: () => void load() };
}
