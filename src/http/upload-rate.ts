// A minimum upload rate, as nginx's client_body_timeout and Apache's mod_reqtimeout MinRate: past
// a short grace, a body must keep arriving at `minBytesPerSecond` on average (counted from the
// end of the grace), or its request is cut. REQUEST_TIMEOUT_MS alone lets a body trickle for the
// whole deadline while it holds its reservation. One sweep a second looks at the uploads in
// progress: no timer and no stream listener per request; a request is unwatched when its response
// closes, so that nothing of a finished request waits for the sweep.
import type { IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'

const SWEEP_INTERVAL_MS = 1000

export interface Upload {
  request: IncomingMessage
  socket: Socket
  startedAt: number
  bytesAtStart: number
  onTooSlow: (socket: Socket) => void
}

export interface UploadRateWatch {
  /**
   * Watches a request whose body is about to be read; `onTooSlow` once if it falls behind. The
   * handle given back is for unwatch (undefined: nothing is watched).
   */
  watch(request: IncomingMessage, onTooSlow: (socket: Socket) => void): Upload | undefined
  /** Stops watching (when the request's response closes): nothing of it is kept until the next sweep. */
  unwatch(upload: Upload | undefined): void
  /** Uploads watched now. */
  readonly size: number
  close(): void
}

/** minBytesPerSecond 0: no minimum (nothing is watched). */
export function createUploadRateWatch(minBytesPerSecond: number, graceMs: number): UploadRateWatch {
  const uploads = new Set<Upload>()
  let timer: NodeJS.Timeout | null = null
  const sweep = () => {
    const now = performance.now()
    for (const upload of uploads) {
      const { request, socket } = upload
      if (request.complete || socket.destroyed) {
        uploads.delete(upload)
        continue
      }
      const late = now - upload.startedAt - graceMs
      // The socket's count is what the client sent, whether or not the parser has passed it on.
      if (late > 0 && socket.bytesRead - upload.bytesAtStart < (minBytesPerSecond * late) / 1000) {
        uploads.delete(upload)
        upload.onTooSlow(socket)
      }
    }
    if (uploads.size === 0 && timer !== null) {
      clearInterval(timer)
      timer = null
    }
  }
  return {
    get size() {
      return uploads.size
    },
    watch(request, onTooSlow) {
      const socket = request.socket
      if (minBytesPerSecond === 0 || request.complete || !socket) return undefined
      const upload = { request, socket, startedAt: performance.now(), bytesAtStart: socket.bytesRead, onTooSlow }
      uploads.add(upload)
      if (timer === null) timer = setInterval(sweep, SWEEP_INTERVAL_MS).unref()
      return upload
    },
    unwatch(upload) {
      if (upload !== undefined) uploads.delete(upload)
    },
    close() {
      uploads.clear()
      if (timer !== null) clearInterval(timer)
      timer = null
    },
  }
}
