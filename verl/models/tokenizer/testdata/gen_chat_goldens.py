#!/usr/bin/env python3
"""Regenerates chat_goldens.json with Python's jinja2 set up as transformers
sets it up for apply_chat_template (ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, loopcontrols, json.dumps-based tojson,
raise_exception, strftime_now). Run from this folder:
    python3 gen_chat_goldens.py
"""
import datetime
import json

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

# Clock for strftime_now; the C++ test renders with the same instant in UTC.
NOW_UNIX = 1721995200  # 2024-07-26 12:00:00 UTC


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.fromtimestamp(NOW_UNIX, datetime.timezone.utc).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


TEMPLATES = {
    "qwen2_5_chat_template.jinja": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "llama3_chat_template.jinja": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
}


def main():
    env = make_env()
    cases = json.load(open("chat_cases.json"))["cases"]
    renders = []
    for name, special in TEMPLATES.items():
        template = env.from_string(open(name).read())
        for case in cases:
            kwargs = dict(messages=case["messages"], tools=case.get("tools"),
                          documents=None,
                          add_generation_prompt=case["add_generation_prompt"])
            kwargs.update(special)
            kwargs.update(case.get("kwargs", {}))
            entry = {"template": name, "case": case["name"]}
            try:
                entry["output"] = template.render(**kwargs)
            except jinja2.exceptions.TemplateError as e:
                entry["error"] = str(e)
            renders.append(entry)
    features = env.from_string(open("jinja_features.jinja").read())
    context = {"messages": cases[2]["messages"], "tools": cases[5]["tools"]}
    renders.append({"template": "jinja_features.jinja", "case": "system_multiturn+tools",
                    "output": features.render(**context)})
    json.dump({"now_unix": NOW_UNIX, "renders": renders},
              open("chat_goldens.json", "w"), ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
