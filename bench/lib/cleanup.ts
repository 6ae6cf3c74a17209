/**
 * Everything a run creates (databases, Redis keys, processes) registers how to
 * undo it here, so a failed or interrupted run leaves nothing behind.
 */
export class Cleanup {
  private readonly steps: Array<{ readonly name: string; readonly run: () => Promise<void> }> = []
  private readonly lastSteps: Array<{ readonly name: string; readonly run: () => Promise<void> }> = []

  /**
   * `last` steps run after every other step, whenever they were registered: a database is
   * dropped (WITH (FORCE)) only once the processes and clients on it have gone, and the server
   * it lives on is stopped after that.
   */
  defer(name: string, run: () => Promise<void>, options: { readonly last?: boolean } = {}): void {
    ;(options.last === true ? this.lastSteps : this.steps).push({ name, run })
  }

  private running: Promise<void> | undefined

  /**
   * Undoes in reverse order of creation, `last` steps last; one failing step does not stop the
   * others. A second call (the run's limit while the run ends by itself) waits for the first's
   * steps rather than running the `last` ones beside them; once done, a later call runs what was
   * registered since.
   */
  runAll(): Promise<void> {
    this.running ??= this.runSteps().finally(() => {
      this.running = undefined
    })
    return this.running
  }

  private async runSteps(): Promise<void> {
    for (const steps of [this.steps, this.lastSteps]) {
      for (let step = steps.pop(); step !== undefined; step = steps.pop()) {
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
}
