# A session runner on BullMQ's Python API (pip install bullmq): the same jobs as plain-bullmq.mjs.
#   ACCOUNT_ID=<GET /auth/me -> account.id> python3 python_runner.py
import asyncio
import base64
import hashlib
import os
import time

from bullmq import Job, Queue

OPTIONS = {"attempts": 10, "backoff": {"type": "exponential", "delay": 500}}


def job_id_of(account_id, key):
    """The typed producer's job id: the account and the key together (keys are per account), no `:`."""
    digest = hashlib.sha256(f"{account_id}\n{key}".encode()).digest()
    return "settle-" + base64.urlsafe_b64encode(digest).decode().rstrip("=")


def differences(name, data, stored):
    """BullMQ keeps the first job added under an id, whoever added it: the fields of the job stored
    there that differ from the job sent (none when it is this job, sent before)."""
    stored_data = stored.data or {}
    fields = sorted(set(data) | set(stored_data))
    return (["kind"] if stored.name != name else []) + [f for f in fields if data.get(f) != stored_data.get(f)]


async def main():
    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
    prefix = os.environ.get("SETTLEMENT_QUEUE_PREFIX", "bull")
    account_id = os.environ["ACCOUNT_ID"]
    session_id = os.environ.get("SESSION_ID", f"sess-{int(time.time() * 1000)}")
    queue = Queue("settlement", {"connection": redis_url, "prefix": prefix})

    async def settle(name, data):
        job_id = job_id_of(account_id, data["idempotency_key"])
        await queue.add(name, data, {**OPTIONS, "jobId": job_id})
        # Read back before taking a result: another job's result is not this one's.
        stored = await Job.fromId(queue, job_id)
        differ = differences(name, data, stored) if stored is not None else []
        if differ:
            raise RuntimeError(f"job {job_id} is another job (its {', '.join(differ)} differ): this {name} was not enqueued")
        # BullMQ's Python API has no result wait: read the job back until the worker has finished it.
        for _ in range(300):
            done = await Job.fromId(queue, job_id)
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
