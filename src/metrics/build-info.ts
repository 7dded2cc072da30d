// study_service_build_info: which release serves which contract, on which Node.js and commit.
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { projectRoot } from '../paths.js'
import { readSpec } from '../spec.js'
import type { MetricsClient } from './client.js'

/** The service release (package.json's version; releases.json lists each one). */
const serviceVersion = (JSON.parse(readFileSync(path.join(projectRoot, 'package.json'), 'utf8')) as { version: string })
  .version
/** The contract it serves (spec/openapi.yaml's info.version): the two move apart. */
const contractVersion = (readSpec() as { info: { version: string } }).info.version

export function registerBuildInfo(client: MetricsClient): void {
  const buildInfo = new client.Gauge({
    name: 'study_service_build_info',
    help: 'Always 1; labels: the service release (version), the contract it serves (contract_version), the Node.js version and the commit (BUILD_COMMIT, empty when unset)',
    labelNames: ['version', 'contract_version', 'node_version', 'commit'],
  })
  buildInfo.set(
    {
      version: serviceVersion,
      contract_version: contractVersion,
      node_version: process.version,
      commit: process.env.BUILD_COMMIT ?? '',
    },
    1,
  )
}
