# A session runner on BullMQ's Python API (pip install bullmq): the same jobs as plain-bullmq.mjs.
#   ACCOUNT_ID=<GET /auth/me -> account.id> python3 python_runner.py
import asyncio
import os
import time

from bullmq import Job, Queue

OPTIONS = {"attempts": 10, "backoff": {"type": "exponential", "delay": 500}}


async def main():
    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
    prefix = os.environ.get("SETTLEMENT_QUEUE_PREFIX", "bull")
    account_id = os.environ["ACCOUNT_ID"]
    session_id = os.environ.get("SESSION_ID", f"sess-{int(time.time() * 1000)}")
    queue = Queue("settlement", {"connection": redis_url, "prefix": prefix})

    async def settle(name, data):
        job = await queue.add(name, data, OPTIONS)
        # BullMQ's Python API has no result wait: read the job back until the worker has finished it.
        for _ in range(300):
            done = await Job.fromId(queue, job.id)
            if done is not None and done.finishedOn:
                if done.failedReason and done.returnvalue is None:
                    raise RuntimeError(f"{name} failed: {done.failedReason}")
                result = done.returnvalue
                print(f"{name} {result['status']}: reserved {result['wallet']['reserved_usd']}")
                return result
            await asyncio.sleep(0.1)
        raise TimeoutError(f"{name} was not answered within 30 s")

    try:
        await settle("reserve", {"account_id": account_id, "session_id": session_id, "amount_usd": "5", "idempotency_key": f"{session_id}-reserve"})
        await settle("spend", {"account_id": account_id, "session_id": session_id, "amount_usd": "1.25", "idempotency_key": f"{session_id}-spend-1"})
        await settle("release", {"account_id": account_id, "session_id": session_id, "idempotency_key": f"{session_id}-release"})
    finally:
        await queue.close()


asyncio.run(main())
