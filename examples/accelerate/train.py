"""A custom Accelerate loop labelled with annotate_accelerator (CPU is fine).

    sudo ingero trace --record --annotate &
    python examples/accelerate/train.py --steps 5
    ingero query --group-by step

Needs `pip install "ingero-annotate[accelerate]"` (or ./ingero-annotate/python).
"""

import argparse

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

from ingero_annotate.integrations.accelerate import annotate_accelerator


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5, help="optimizer steps")
    parser.add_argument("--accumulation", type=int, default=1)
    parser.add_argument("--run-id", default="accelerate-example")
    args = parser.parse_args()

    torch.manual_seed(0)
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=args.accumulation)
    model = torch.nn.Linear(16, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    n = args.steps * args.accumulation * 4
    loader = DataLoader(TensorDataset(torch.randn(n, 16), torch.randn(n, 1)), batch_size=4)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    ingero = annotate_accelerator(accelerator, run_id=args.run_id)
    for x, y in loader:
        with ingero.step(epoch=0):
            with accelerator.accumulate(model):
                with ingero.stage("forward"):
                    loss = torch.nn.functional.mse_loss(model(x), y)
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
    print("optimizer steps:", ingero.optimizer_steps)


if __name__ == "__main__":
    main()
