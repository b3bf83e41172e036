// The playground's shell: asks the server which profile it runs and whether this browser is signed
// in, then shows the sign-in form (hosted profile, signed out) or the pages, one at a time, picked
// by the URL's hash (#/chat, #/compare, #/tokens, #/usage). The local profile has no sign-in, and
// no tokens or usage (those belong to accounts).
import "./style.css";
import { getSession, listModels, type Model, type Session, signIn, signOut, whenSignedOut } from "./api";
import { chatPage } from "./chat";
import { comparePage } from "./compare";
import { errorLine, field, h, type Page, showError } from "./dom";
import { tokensPage } from "./tokens";
import { usagePage } from "./usage";

type Route = "chat" | "compare" | "tokens" | "usage";

const ROUTES: readonly { route: Route; label: string; hostedOnly: boolean }[] = [
  { route: "chat", label: "Chat", hostedOnly: false },
  { route: "compare", label: "Side by side", hostedOnly: false },
  { route: "tokens", label: "Tokens", hostedOnly: true },
  { route: "usage", label: "Usage", hostedOnly: true },
];

const root = document.getElementById("app") as HTMLElement;
/** The hash listener of the pages shown now, removed when they are replaced (sign-out, session ended). */
let routeListener: (() => void) | null = null;

async function start(): Promise<void> {
  whenSignedOut(() => void restart("Your session has ended; sign in again."));
  await restart();
}

async function restart(notice?: string): Promise<void> {
  if (routeListener) window.removeEventListener("hashchange", routeListener);
  routeListener = null;
  try {
    const session = await getSession();
    if (session.profile === "hosted" && !session.signed_in) showSignIn(notice);
    else await showApp(session);
  } catch (failure) {
    const error = errorLine();
    showError(error, failure);
    root.replaceChildren(
      h(
        "main",
        { class: "narrow" },
        h("h1", {}, "modelhost playground"),
        error,
        h("button", { type: "button", onclick: () => void restart() }, "Try again"),
      ),
    );
  }
}

function showSignIn(notice?: string): void {
  document.title = "Sign in · modelhost playground";
  const account = h("input", { id: "sign-in-account", name: "username", autocomplete: "username", required: true });
  const password = h("input", {
    id: "sign-in-password",
    name: "password",
    type: "password",
    autocomplete: "current-password",
    required: true,
  });
  const submit = h("button", { type: "submit", id: "sign-in-submit" }, "Sign in");
  const error = errorLine();
  error.id = "sign-in-error";
  const form = h("form", { id: "sign-in-form", class: "stack" }, field("Account", account), field("Password", password), submit);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    showError(error, null);
    submit.disabled = true;
    try {
      const session = await signIn(account.value.trim(), password.value);
      history.replaceState(null, "", "#/chat");
      await showApp(session);
    } catch (failure) {
      showError(error, failure);
      password.select();
    } finally {
      submit.disabled = false;
    }
  });
  root.replaceChildren(
    h(
      "main",
      { class: "narrow sign-in" },
      h("h1", {}, "modelhost playground"),
      notice ? h("p", { class: "notice", role: "status" }, notice) : null,
      h("p", {}, "Sign in with your account to try the models, manage your tokens and see your usage."),
      form,
      error,
      h(
        "p",
        { class: "hint" },
        "No password yet? The operator sets one with ",
        h("code", {}, "modelhost account password NAME"),
        ", or gives you a one-time sign-in link.",
      ),
    ),
  );
  account.focus();
}

async function showApp(session: Session): Promise<void> {
  let models: Model[];
  try {
    models = (await listModels()).sort((a, b) => a.id.localeCompare(b.id));
  } catch (failure) {
    if (session.profile === "hosted" && !(await getSession()).signed_in) return showSignIn();
    throw failure;
  }
  const hosted = session.profile === "hosted";
  const routes = ROUTES.filter((entry) => hosted || !entry.hostedOnly);
  const pages = new Map<Route, Page>();
  const build = (route: Route): Page => {
    switch (route) {
      case "chat":
        return { element: chatPage(models) };
      case "compare":
        return { element: comparePage(models) };
      case "tokens":
        return tokensPage();
      case "usage":
        return usagePage();
      default:
        return route satisfies never;
    }
  };

  const links = routes.map(({ route, label }) => h("a", { href: `#/${route}`, "data-route": route }, label));
  const main = h("main", { id: "main" });
  const signOutButton = h("button", { type: "button", id: "sign-out", class: "secondary" }, "Sign out");
  signOutButton.addEventListener("click", async () => {
    signOutButton.disabled = true;
    try {
      await signOut();
    } finally {
      history.replaceState(null, "", location.pathname);
      await restart("You have signed out.");
    }
  });
  const who = hosted
    ? h(
        "div",
        { class: "who" },
        h("span", { id: "account-name" }, `${session.account?.name ?? ""}`),
        h("span", { class: "hint" }, ` · tier ${session.account?.tier ?? ""}`),
        " ",
        signOutButton,
      )
    : h("div", { class: "who hint" }, "Local server: no sign-in");

  root.replaceChildren(
    h("a", { href: "#main", class: "skip" }, "Skip to content"),
    h(
      "header",
      {},
      h("h1", {}, "modelhost ", h("span", { class: "hint" }, "playground")),
      h("nav", { "aria-label": "Pages" }, ...links),
      who,
    ),
    main,
  );

  function show(): void {
    const wanted = location.hash.replace(/^#\/?/, "") as Route;
    const route = routes.some((entry) => entry.route === wanted) ? wanted : "chat";
    let page = pages.get(route);
    if (!page) {
      page = build(route);
      pages.set(route, page);
      main.append(page.element);
    }
    for (const [name, other] of pages) other.element.hidden = name !== route;
    for (const link of links) {
      if (link.dataset.route === route) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    document.title = `${routes.find((entry) => entry.route === route)?.label ?? ""} · modelhost playground`;
    page.refresh?.();
  }
  routeListener = show;
  window.addEventListener("hashchange", show);
  show();
}

void start();
