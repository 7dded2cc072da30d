// The iana-time-zone format: what Intl's zone database knows, remembered once accepted.
import t from 'tap'
import { isIanaTimeZone } from '../../src/validation/time-zone.js'
import * as validators from '../../generated/validators.cjs'

const checks: [string, (zone: string) => boolean][] = [
  ['the runtime format', isIanaTimeZone],
  [
    'the generated body validator',
    (zone) =>
      (validators as unknown as Record<string, (d: unknown) => boolean>).UserCreateRequest!({
        system_user_id: 'u',
        system_uuid: '0b7c7c36-8f0e-4d5b-9a51-3a0f6f7b1c11',
        full_name: 'A',
        timezone: zone,
      }),
  ],
]

for (const [name, accepts] of checks) {
  t.test(`${name}: known zones and aliases pass, every time they are asked`, async (t) => {
    for (let round = 0; round < 3; round++) {
      for (const zone of ['UTC', 'Europe/Berlin', 'America/New_York', 'US/Eastern', 'Etc/GMT+5'])
        t.ok(accepts(zone), `${zone}, round ${round}`)
    }
  })

  t.test(`${name}: Intl matches names case-insensitively, and so does the memo`, async (t) => {
    t.ok(accepts('europe/berlin'))
    t.ok(accepts('EUROPE/BERLIN'))
    t.ok(accepts('Europe/Berlin'))
  })

  t.test(`${name}: unknown or malformed zones fail, also after a real zone was remembered`, async (t) => {
    t.ok(accepts('Europe/Paris'))
    for (const zone of [
      'Europe/Atlantis',
      'Mars/Olympus_Mons',
      'Europe/Paris ',
      '../etc/passwd',
      '',
      'Europe//Paris',
    ]) {
      t.notOk(accepts(zone), JSON.stringify(zone))
      t.notOk(accepts(zone), `${JSON.stringify(zone)} again`)
    }
  })
}

t.test('a refused zone is not remembered', async (t) => {
  t.notOk(isIanaTimeZone('Nowhere/Land'))
  const memo = (isIanaTimeZone as unknown as { accepted?: Set<string> }).accepted
  t.ok(memo?.has('europe/berlin'), 'accepted zones are kept case-folded')
  t.notOk(memo?.has('nowhere/land'))
})
