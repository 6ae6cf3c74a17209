/**
 * Everything a run creates (databases, Redis keys, processes) registers how to
 * undo it here, so a failed or interrupted run leaves nothing behind.
 */
export class Cleanup {
  private readonly steps: Array<{ readonly name: string; readonly run: () => Promise<void> }> = []

  defer(name: string, run: () => Promise<void>): void {
    this.steps.push({ name, run })
  }

  /** Undoes in reverse order of creation; one failing step does not stop the others. */
  async runAll(): Promise<void> {
    for (let step = this.steps.pop(); step !== undefined; step = this.steps.pop()) {
      try {
        await step.run()
      } catch (error) {
        process.stderr.write(
          `cleanup "${step.name}" failed: ${error instanceof Error ? error.message : String(error)}\n`
        )
      }
    }
  }
}
