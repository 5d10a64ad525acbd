"""vLLM offline generation with one span per request. Needs a CUDA GPU.

    sudo ingero trace --record --annotate &
    python examples/vllm/generate.py --model facebook/opt-125m   # any local or cached model
    ingero query --group-by request_id      # or: ingero explain --by-request

Each finished request becomes a span (request_id, model, prompt_tokens,
output_tokens) plus queued / prefill / decode spans from vLLM's request
stats. The spans are trace-wide (unscoped): with vLLM V1 the GPU work runs
in the engine-core process, not in this one. Needs
`pip install "ingero-annotate[vllm]"` (or ./ingero-annotate/python).
"""

import argparse

from vllm import LLM, SamplingParams

from ingero_annotate.integrations.vllm import RequestEmitter


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True, help="a model vLLM can load here (local path or cached)")
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()

    # disable_log_stats=False: the request timestamps behind the queued /
    # prefill / decode spans are only kept when stats are logged.
    llm = LLM(model=args.model, disable_log_stats=False, gpu_memory_utilization=0.5)
    emitter = RequestEmitter(model=args.model)
    prompts = ["Request %d: tell me about GPUs." % i for i in range(args.requests)]
    outputs = llm.generate(prompts, SamplingParams(max_tokens=args.max_tokens))
    emitter.record_all(outputs)
    for out in outputs[:3]:
        print(out.request_id, repr(out.outputs[0].text[:60]))


if __name__ == "__main__":
    main()
