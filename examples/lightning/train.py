"""Tiny Lightning run labelled with IngeroCallback (CPU is fine).

    sudo ingero trace --record --annotate &        # or any --annotate agent
    python examples/lightning/train.py --batches 6
    ingero query --group-by step

Needs `pip install "ingero-annotate[lightning]"` (or ./ingero-annotate/python).
"""

import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

try:
    import lightning.pytorch as pl
except ImportError:  # the older package name
    import pytorch_lightning as pl

from ingero_annotate.integrations.lightning import IngeroCallback


class TinyModel(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(16, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=6, help="training batches (global steps)")
    parser.add_argument("--run-id", default="lightning-example")
    args = parser.parse_args()

    torch.manual_seed(0)
    data = TensorDataset(torch.randn(args.batches * 4, 16), torch.randn(args.batches * 4, 1))
    trainer = pl.Trainer(
        max_epochs=1,
        limit_train_batches=args.batches,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[IngeroCallback(run_id=args.run_id)],
    )
    trainer.fit(TinyModel(), DataLoader(data, batch_size=4))


if __name__ == "__main__":
    main()
