// The page's only script: asks /stream with EventSource and renders what arrives.
// Model output is only ever inserted as text (textContent, text nodes), never as HTML.

const form = document.querySelector("#ask");
const questionInput = document.querySelector("#question");
const answer = document.querySelector("#answer");
const sources = document.querySelector("#sources");
const status = document.querySelector("#status");
let source;

form.addEventListener("submit", (event) => {
  event.preventDefault();
  ask(questionInput.value);
});

function ask(question) {
  source?.close();
  answer.textContent = "";
  sources.replaceChildren();
  answer.classList.remove("failed");
  status.textContent = "Thinking…";

  source = new EventSource(`/stream?question=${encodeURIComponent(question)}`);
  source.addEventListener("sources", (event) => showSources(JSON.parse(event.data)));
  source.addEventListener("message", (event) => {
    if (event.data === "[DONE]") {
      // Closed here, or EventSource would reconnect when the server ends the stream, asking again.
      source.close();
      status.textContent = "Done.";
      return;
    }
    status.textContent = "Answering…";
    answer.append(document.createTextNode(event.data));
  });
  source.addEventListener("error", (event) => {
    // Either the server's `event: error` (with a message) or a lost connection (without one).
    source.close();
    status.textContent = "";
    const message = document.createElement("p");
    message.className = "error";
    message.textContent = `Error: ${event.data ?? "the connection to the server was lost."}`;
    answer.append(message);
  });
}

function showSources(matches) {
  for (const match of matches) {
    const item = document.createElement("li");
    item.className = match.used ? "used" : "unused";
    const title = document.createElement("span");
    title.className = "source";
    title.textContent = `${match.source} #${match.position}`;
    const score = document.createElement("span");
    score.className = `score band-${match.band.replace(" ", "-")}`;
    score.textContent = `${match.similarity.toFixed(3)} ${match.band}${match.used ? "" : " (below threshold, not used)"}`;
    const excerpt = document.createElement("blockquote");
    excerpt.textContent = match.text;
    item.append(title, " ", score, excerpt);
    sources.append(item);
  }
}
