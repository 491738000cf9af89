import { Empty, PageHeader } from '../../components/ui';

export default function AcceptInvite() {
  return (
    <>
      <PageHeader title="AcceptInvite" />
      <Empty title="Coming in stage 1" />
    </>
  );
}
