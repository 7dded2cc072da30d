// Keeps this process's event loop late (synchronous work in slices, with I/O between them)
// until stopped: how tests make load shedding see real overload.
export function hogEventLoop(sliceMs = 200): () => void {
  let hogging = true
  const hog = () => {
    if (!hogging) return
    const end = performance.now() + sliceMs
    while (performance.now() < end);
    setImmediate(hog)
  }
  hog()
  return () => {
    hogging = false
  }
}
