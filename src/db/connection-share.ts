// A bounded share of the pool for one kind of long holder (learner exports stream for as long as
// their reader reads): at most `max` connections at once; a caller waits for a slot at most as
// long as it would wait for a connection, then gets DatabaseDeadlineExceeded('connection_wait').
import { connectionWaitMs, DatabaseDeadlineExceeded, type DeadlineReason } from './deadline.js'

export class ConnectionShare {
  #held = 0
  readonly #waiting: (() => void)[] = []

  constructor(
    readonly max: number,
    readonly onExceeded: (reason: DeadlineReason) => void,
  ) {}

  get held(): number {
    return this.#held
  }

  /** Takes a slot; resolves to its release (idempotent). */
  async acquire(): Promise<() => void> {
    // A released slot is handed to the first waiter as it is (held stays), so none is taken twice.
    if (this.#held >= this.max) await this.#wait(connectionWaitMs())
    else this.#held++
    let released = false
    return () => {
      if (released) return
      released = true
      const next = this.#waiting.shift()
      if (next) next()
      else this.#held--
    }
  }

  #wait(ms: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const wake = () => {
        clearTimeout(timer)
        resolve()
      }
      const timer =
        ms === Number.POSITIVE_INFINITY
          ? undefined
          : setTimeout(
              () => {
                this.#waiting.splice(this.#waiting.indexOf(wake), 1)
                this.onExceeded('connection_wait')
                reject(new DatabaseDeadlineExceeded('connection_wait'))
              },
              Math.max(0, ms),
            )
      this.#waiting.push(wake)
    })
  }
}
