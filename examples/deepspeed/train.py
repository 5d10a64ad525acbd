"""DeepSpeed training labelled with annotate_engine. Needs a CUDA GPU.

    sudo ingero trace --record --annotate &
    deepspeed --num_gpus 1 examples/deepspeed/train.py --steps 8
    ingero query --group-by step

Each rank emits forward / backward / optimizer_step stage spans with the
engine's global step, scoped to its own process. Needs
`pip install "ingero-annotate[deepspeed]"` (or ./ingero-annotate/python).
"""

import argparse

import deepspeed
import torch

from ingero_annotate.integrations.deepspeed import annotate_engine


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--accumulation", type=int, default=2)
    parser.add_argument("--local_rank", type=int, default=0)  # set by the deepspeed launcher
    args = parser.parse_args()

    model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 1))
    config = {
        "train_micro_batch_size_per_gpu": 32,
        "gradient_accumulation_steps": args.accumulation,
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
        "zero_optimization": {"stage": 1},
    }
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    engine = annotate_engine(engine, run_id="deepspeed-example")
    device = engine.device
    for _ in range(args.steps * args.accumulation):
        x = torch.randn(32, 512, device=device)
        y = torch.randn(32, 1, device=device)
        loss = torch.nn.functional.mse_loss(engine(x), y)
        engine.backward(loss)
        engine.step()
    print("global steps:", engine.global_steps)


if __name__ == "__main__":
    main()
