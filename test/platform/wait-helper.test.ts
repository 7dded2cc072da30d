// The tests' wait helper: a read that finds nothing (null, undefined) is "not yet", never an
// answer, so a wait on a row or a column that never appears fails at its deadline.
import t from 'tap'
import { waitFor } from '../helpers/wait.js'

t.test('null and undefined are not answers unless asked', async (t) => {
  await t.rejects(
    waitFor('a null', () => null, { timeoutMs: 50 }),
    /gave up waiting \(50 ms\) for a null/,
  )
  await t.rejects(
    waitFor('an undefined', async () => undefined, { timeoutMs: 50 }),
    /gave up waiting/,
  )
  await t.rejects(
    waitFor('a false', () => false, { timeoutMs: 50 }),
    /gave up waiting/,
  )
  t.equal(await waitFor('a null on purpose', () => null, { timeoutMs: 50, nullIsAnAnswer: true }), null)
})

t.test('the first answer is returned, falsy ones included', async (t) => {
  let calls = 0
  t.equal(await waitFor('the third call', () => (++calls < 3 ? null : 'three'), { everyMs: 1 }), 'three')
  t.equal(calls, 3)
  t.equal(await waitFor('a zero', () => 0), 0)
  t.equal(await waitFor('an empty string', () => ''), '')
})
