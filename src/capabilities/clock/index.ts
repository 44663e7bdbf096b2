/**
 * The clock capability:
 *   berm.now          () -> decimal milliseconds since the Unix epoch, UTC
 *   berm.clock.offset () -> decimal seconds east of UTC of the host's local time zone, now
 * Both take no fields; extra fields are refused so a guest bug does not pass silently.
 */
import { arity, defineCapability, guarded, ok, type Capability } from '../types.js';

/** The clock capability. */
export const clockCapability: Capability = defineCapability({
  name: 'clock',
  calls: {
    'berm.now': (fields) =>
      guarded('berm.now', () => arity('berm.now', fields, '', 0) ?? ok(String(Date.now()))),
    'berm.clock.offset': (fields) =>
      guarded(
        'berm.clock.offset',
        // getTimezoneOffset is minutes *west* of UTC, hence the sign flip.
        () => arity('berm.clock.offset', fields, '', 0) ?? ok(String(-new Date().getTimezoneOffset() * 60)),
      ),
  },
});
