"""A Python worker process for crash and stop tests. argv: address queue type mode.
mode "hang-async": an async handler that prints "started <id> <retried>" and waits forever;
mode "hang-sync": a plain function that does the same, ignoring its cancellation;
SIGTERM stops the worker gracefully (worker.run), with a short grace."""
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conveyor import Task, Worker  # noqa: E402

address, queue, task_type, mode = sys.argv[1:5]
worker = Worker(address=address, queues=[queue], concurrency=1)

if mode == "hang-async":
    @worker.task(task_type)
    async def hang(task: Task) -> None:
        print(f"started {task.id} {task.retried}", flush=True)
        await asyncio.Event().wait()
else:
    @worker.task(task_type)
    def hang_sync(task: Task) -> None:
        print(f"started {task.id} {task.retried}", flush=True)
        while True:  # ignores ctx.cancelled on purpose: the process must still exit
            time.sleep(0.05)

print("ready", flush=True)
worker.run(grace=0.2)
print("stopped", flush=True)
