// /docs works from any host name over plain HTTP and reads /openapi.json; its static folder
// cannot be left. (Checked by hand in headless Chromium at http://127.0.0.2:PORT/docs.)
import t from 'tap'
import { buildTestApp } from '../helpers/app.js'
import { escapesStaticFolder } from '../../src/docs/static-path.js'

t.test('the page is allowed to load its assets over plain HTTP and reads /openapi.json', async (t) => {
  const api = await buildTestApp(t)
  const page = await api.app.inject({ method: 'GET', url: '/docs/', headers: { host: 'docker-host:3000' } })
  t.equal(page.statusCode, 200)
  const csp = String(page.headers['content-security-policy'])
  t.match(csp, "default-src 'self'", 'a CSP is still sent')
  t.notMatch(csp, 'upgrade-insecure-requests', 'no upgrade to https for the assets')
  t.match(page.body, './static/swagger-initializer.js')

  const init = await api.app.inject({ method: 'GET', url: '/docs/static/swagger-initializer.js' })
  t.equal(init.statusCode, 200)
  t.notMatch(String(init.headers['content-security-policy']), 'upgrade-insecure-requests')
  // Swagger UI's Topbar loads `urls` instead of the `url` (./json) the initializer also sets.
  t.match(init.body, /"urls":\[\{"url":"\/openapi\.json","name":"Study Service"\}\]/)
  t.match(init.body, /"urls\.primaryName":"Study Service"/)
  t.match(init.body, 'StandaloneLayout', 'the layout that has the Topbar')
  t.same(
    (await api.app.inject({ method: 'GET', url: '/docs/json' })).json(),
    (await api.app.inject({ method: 'GET', url: '/openapi.json' })).json(),
  )

  const css = await api.app.inject({ method: 'GET', url: '/docs/static/index.css' })
  t.equal(css.statusCode, 200, 'assets are served')
})

t.test('paths that try to leave /docs/static answer 404 COMMON_404', async (t) => {
  const api = await buildTestApp(t)
  const attempts = [
    '/docs/static/../../package.json',
    '/docs/static/..%2f..%2fpackage.json',
    '/docs/static/%2e%2e/%2e%2e/package.json',
    '/docs/static/%2e%2e%2f%2e%2e%2fpackage.json',
    '/docs/static/..%5c..%5cpackage.json',
    '/docs/static/%252e%252e%252fpackage.json',
    '/docs/static/..\\..\\package.json',
    '/docs/static/%00',
  ]
  for (const url of attempts) {
    const res = await api.app.inject({ method: 'GET', url })
    t.equal(res.statusCode, 404, url)
    t.same(
      res.json(),
      {
        code: 'COMMON_404',
        key: 'ROUTE_NOT_FOUND',
        message: 'No route matches this method and path.',
        source: 'business',
      },
      url,
    )
  }
  t.ok(escapesStaticFolder('/docs/static/a/%2e%2e/%2e%2e/b'))
  t.notOk(escapesStaticFolder('/docs/static/swagger-ui.css'))
})
