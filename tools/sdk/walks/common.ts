// What every SDK walk records: one line per operation, so the check can require that each
// of the contract's operations was called and answered 2xx, and that no answer carried
// Prism's `sl-violations` header.
export interface Call {
  operationId: string
  status: number
  violations: string | null
}

export class Recorder {
  readonly calls: Call[] = []
  record(operationId: string, response: { status: number; headers: Headers }) {
    this.calls.push({ operationId, status: response.status, violations: response.headers.get('sl-violations') })
  }
}

export function expect(condition: unknown, what: string): void {
  if (!condition) throw new Error(`walk: ${what}`)
}

export const owner = (id: string) => ({
  system_user_id: `sdk-${id}`,
  system_uuid: '0b3d2c1a-4e5f-4a6b-8c7d-9e0f1a2b3c4d',
})
export const FAR_FUTURE = '2100-01-01T00:00:00Z'
