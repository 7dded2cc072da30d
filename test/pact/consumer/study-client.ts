// The partner's side: a small client of the Study Service, as a partner would write it with
// fetch. The consumer pacts (study-web.pact.ts) exercise it against Pact's mock server.
export interface Owner {
  system_uuid: string
  system_user_id: string
}

export class StudyClient {
  constructor(
    private readonly baseUrl: string,
    private readonly apiKey: string,
  ) {}

  private async send(method: string, path: string, body?: unknown, idempotencyKey?: string) {
    const headers: Record<string, string> = { 'X-API-Key': this.apiKey, Accept: 'application/json' }
    if (body !== undefined) headers['Content-Type'] = 'application/json'
    if (idempotencyKey) headers['Idempotency-Key'] = idempotencyKey
    const res = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    return { status: res.status, body: (await res.json()) as any }
  }

  createUser(user: Owner & { full_name: string; timezone?: string }, idempotencyKey: string) {
    return this.send('POST', '/api/v1/user', user, idempotencyKey)
  }
  getUser(owner: Owner) {
    return this.send('GET', `/api/v1/user/${owner.system_uuid}/${encodeURIComponent(owner.system_user_id)}`)
  }
  patchUser(owner: Owner, changes: Record<string, unknown>, idempotencyKey: string) {
    return this.send(
      'PATCH',
      `/api/v1/user/${owner.system_uuid}/${encodeURIComponent(owner.system_user_id)}`,
      changes,
      idempotencyKey,
    )
  }
  createConspectus(body: Owner & Record<string, unknown>, idempotencyKey: string) {
    return this.send('POST', '/api/v1/conspectuses', body, idempotencyKey)
  }
  review(conspectusUuid: string, owner: Owner, outcome: 'remembered' | 'forgot', idempotencyKey: string) {
    return this.send(
      'POST',
      `/api/v1/conspectuses/${conspectusUuid}/actions/review`,
      { ...owner, outcome },
      idempotencyKey,
    )
  }
  dueList(owner: Owner, asOf: string) {
    return this.send(
      'GET',
      `/api/v1/conspectuses/due?system_user_id=${encodeURIComponent(owner.system_user_id)}&system_uuid=${owner.system_uuid}&as_of=${encodeURIComponent(asOf)}`,
    )
  }
  ingest(event: Record<string, unknown>) {
    return this.send('POST', '/api/v1/telemetry/docs-search', event)
  }
  ingestBatch(events: Record<string, unknown>[]) {
    return this.send('POST', '/api/v1/telemetry/docs-search/batch', { events })
  }
}
