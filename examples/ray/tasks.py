"""Ray tasks labelled with annotate_task, on a local one-node Ray cluster.

Ray 2.60 removed `ray.init(local_mode=True)`; `--local-mode` is passed on
only to Ray versions that still accept it. Each task is a span in the worker
process that ran it.

    sudo ingero trace --record --annotate &
    python examples/ray/tasks.py --tasks 3
    ingero query --group-by task_id

Needs `pip install "ingero-annotate[ray]"` (or ./ingero-annotate/python).
"""

import argparse
import time

import ray

from ingero_annotate.integrations.ray import annotate_task, task_annotation


@ray.remote
@annotate_task(labels={"phase": "predict"})
def work(i: int) -> int:
    with task_annotation(step=i):  # a nested span inside the task, same ids
        time.sleep(0.05)
    return i * i


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=3)
    parser.add_argument("--local-mode", action="store_true", help="ray.init(local_mode=True), Ray < 2.60 only")
    args = parser.parse_args()

    extra = {"local_mode": True} if args.local_mode else {}
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, **extra)
    try:
        print(ray.get([work.remote(i) for i in range(args.tasks)]))
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
