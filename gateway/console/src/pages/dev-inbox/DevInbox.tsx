import { Empty, PageHeader } from '../../components/ui';

export default function DevInbox() {
  return (
    <>
      <PageHeader title="DevInbox" />
      <Empty title="Coming in stage 1" />
    </>
  );
}
