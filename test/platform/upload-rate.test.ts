// The minimum upload rate's watch (src/http/upload-rate.ts) on its own: a request is watched while
// its body is read and unwatched when its response closes, so that nothing of a finished request
// is kept until the next sweep; a request too slow past the grace is reported once.
import t from 'tap'
import type { IncomingMessage } from 'node:http'
import { createUploadRateWatch } from '../../src/http/upload-rate.js'
import { waitFor } from '../helpers/wait.js'

const receiving = (bytesRead = 0) =>
  ({ complete: false, socket: { bytesRead, destroyed: false } }) as unknown as IncomingMessage

t.test('watched until unwatched: nothing kept for the sweep', async (t) => {
  const watch = createUploadRateWatch(1000, 60_000)
  t.teardown(() => watch.close())
  const a = watch.watch(receiving(), () => t.fail('not slow within the grace'))
  const b = watch.watch(receiving(), () => t.fail('not slow within the grace'))
  t.equal(watch.size, 2)
  watch.unwatch(a)
  t.equal(watch.size, 1)
  watch.unwatch(a)
  watch.unwatch(undefined)
  t.equal(watch.size, 1, 'unwatching twice, or nothing, changes nothing')
  watch.unwatch(b)
  t.equal(watch.size, 0)
})

t.test('nothing is watched without a minimum, or for a body already complete', async (t) => {
  const off = createUploadRateWatch(0, 1000)
  t.equal(
    off.watch(receiving(), () => {}),
    undefined,
  )
  t.equal(off.size, 0)
  const on = createUploadRateWatch(1000, 1000)
  t.teardown(() => on.close())
  const complete = { complete: true, socket: { bytesRead: 10, destroyed: false } } as unknown as IncomingMessage
  t.equal(
    on.watch(complete, () => {}),
    undefined,
  )
  t.equal(on.size, 0)
})

t.test('a body slower than the minimum past the grace is reported once and dropped', async (t) => {
  const watch = createUploadRateWatch(1_000_000, 0)
  t.teardown(() => watch.close())
  let reported = 0
  watch.watch(receiving(), () => reported++)
  // The next sweep (one a second) reports it and drops it: nothing is left to report again.
  await waitFor('the slow body to be reported', () => reported > 0)
  t.equal(reported, 1)
  t.equal(watch.size, 0, 'dropped once reported')
})
