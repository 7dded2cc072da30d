import fp from 'fastify-plugin'
import type { Config } from '../../config.js'

declare module 'fastify' {
  interface FastifyInstance {
    config: Config
  }
}

/** Makes the checked configuration available as `fastify.config`. */
export default fp<{ config: Config }>(
  async (fastify, { config }) => {
    fastify.decorate('config', config)
  },
  { name: 'config' },
)
